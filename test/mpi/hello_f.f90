! hello_f — MPICH's Fortran binding over psport: rank, size and an allreduce (test/mpi/run-local).
program hello
  use mpi
  implicit none
  integer :: ierr, rank, nprocs, total
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  call MPI_Allreduce(rank, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  print '(a,i0,a,i0,a,i0)', 'fortran rank ', rank, ' of ', nprocs, ' sum ', total
  call MPI_Finalize(ierr)
end program hello
