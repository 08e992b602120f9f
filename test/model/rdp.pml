/*
 * rdp.pml -- SPIN model of the data-transfer part of psport's RDP
 * (ParaStation2 reliability protocol, seed 001 section 3 / table 1, as
 * written down in mcp/PROTOCOL.md).
 *
 * One direction of data: Sender --DATA--> Receiver --ACK/NACK--> Sender,
 * plus the receiving Host that drains the receive ring.  Both network
 * channels may LOSE, DUPLICATE and REORDER frames.  See README.md beside
 * this file for the bounds, the properties and what is abstracted away;
 * test/model/check-rdp runs the checks.
 *
 * Everything below is a compile-time parameter (spin -DNAME=value ...).
 */

/* ---- bounds ----------------------------------------------------------- */
#ifndef M
#define M 8            /* sequence numbers modulo M (the firmware: 256)        */
#endif
#ifndef W
#define W 3            /* send window, W < M/2 (the firmware: <= 64)           */
#endif
#ifndef K
#define K 3            /* receive ring slots (one always kept in reserve)      */
#endif
#ifndef N
#define N 17           /* messages 0..N-1 sent; N = 2M+1 wraps seq twice       */
#endif
#ifndef CD
#define CD 2           /* DATA frames in flight at most (channel capacity)     */
#endif
#ifndef CA
#define CA 2           /* ACK/NACK frames in flight at most                    */
#endif
#ifndef R
#define R 1            /* reorder distance: a frame may be overtaken by at most
                          R frames sent after it (the "maximum frame lifetime"
                          every finite sequence space needs)                   */
#endif

/*
 * Fault budgets.  Without -DFAIR the channels are adversarial: unbounded
 * losses, duplicates and reorderings (only R bounds how far one frame can
 * be overtaken).  With -DFAIR (the liveness runs) the faults are bounded
 * in total, so that every run is eventually fault-free ("fair channel").
 */
#ifdef FAIR
#ifndef LOSSES
#define LOSSES 2
#endif
#ifndef DUPS
#define DUPS 1
#endif
#ifndef REORDERS
#define REORDERS 1
#endif
byte losses, dups, reorders;
#define CAN_LOSE    (losses < LOSSES)
#define CAN_DUP     (dups < DUPS)
#define CAN_REORDER (reorders < REORDERS)
#define LOST        losses++
#define DUPED       dups++
#define REORDERED   reorders++
#else
#define CAN_LOSE    true
#define CAN_DUP     true
#define CAN_REORDER true
#define LOST        skip
#define DUPED       skip
#define REORDERED   skip
#endif

/*
 * Mutants: deliberately broken variants the checks must reject
 * (test/model/check-rdp requires each of them to FAIL).
 *   -DMUTANT=1  receiver accepts a frame with seq > expected (no gap check)
 *               -> safety: wrong message delivered
 *   -DMUTANT=2  receiver accepts into the last free slot (no second-free-
 *               buffer rule) -> safety: no reserve slot for the next frame
 *   -DMUTANT=3  receiver does not re-ACK duplicates (table 1, DATA "<" row
 *               dropped) -> liveness: the sender retries forever once the
 *               last ACK is lost
 *   -DW=4       window = M/2: an ACK covering a whole window reads as older
 *               than snd_una in signed mod-M arithmetic and is ignored
 *               forever -> liveness
 *   -DR=2       the network reorders further than the sequence space
 *               tolerates: a stale ACK is taken for a new one -> safety:
 *               the sender releases frames the receiver never accepted
 */
#ifndef MUTANT
#define MUTANT 0
#endif

/* frame types on the ACK channel */
#define T_ACK   1
#define T_NACK  2
#define T_NOBUF 3      /* NACK because the second-free-buffer check failed */

/* signed difference a - b of two sequence numbers mod M, in [-M/2, M/2) */
#define SDIFF(a, b)  ((((a) - (b) + M + M / 2) % M) - M / 2)

/* ---- the two channels: arrays ordered oldest first -------------------- */
/* DATA channel: seq (mod M, all the receiver looks at) and the payload
 * (message number, carried only so that the receiver can check it).      */
byte dseq[CD], dpay[CD], dovt[CD];   /* dovt: times this frame was overtaken */
byte dcnt;
/* ACK channel: type and value (cumulative ack = next expected seq mod M)   */
byte atyp[CA], aval[CA], aovt[CA];
byte acnt;

/* ---- protocol state shared for the properties ------------------------- */
byte una, nxt, tx;     /* sender: oldest unacked, next new, next to (re)send */
bool sdone;            /* sender: everything acknowledged                    */
byte rnxt;             /* receiver: next expected seq (mod M)                */
byte rbuf[K], rcnt;    /* receive ring: READY slots in acceptance order      */
byte expect;           /* ghost: message number the receiver accepts next    */
byte delivered;        /* ghost: messages handed to the host, in order       */

hidden byte i, j;      /* scratch, only used inside atomic sequences         */
hidden byte fs, fp;    /* scratch: received frame (seq/type, payload/value)  */
hidden short d;

/* Pick the frame to take from a channel: normally the oldest (index 0);
 * reordering takes a younger one, overtaking every older frame, which is
 * allowed only for frames overtaken fewer than R times so far.           */
#define PICK(cnt, ovt) \
  i = 0; \
  do \
  :: i + 1 < cnt && ovt[i] < R && CAN_REORDER -> i++ \
  :: break \
  od; \
  if \
  :: i > 0 -> REORDERED; j = 0; \
     do :: j < i -> ovt[j]++; j++ :: else -> break od \
  :: else \
  fi

/* remove entry i of the DATA / ACK channel, keep the arrays canonical */
inline drem() {
  j = i;
  do
  :: j + 1 < dcnt -> dseq[j] = dseq[j+1]; dpay[j] = dpay[j+1]; dovt[j] = dovt[j+1]; j++
  :: else -> break
  od;
  dcnt--; dseq[dcnt] = 0; dpay[dcnt] = 0; dovt[dcnt] = 0
}
inline arem() {
  j = i;
  do
  :: j + 1 < acnt -> atyp[j] = atyp[j+1]; aval[j] = aval[j+1]; aovt[j] = aovt[j+1]; j++
  :: else -> break
  od;
  acnt--; atyp[acnt] = 0; aval[acnt] = 0; aovt[acnt] = 0
}

/* take a frame (possibly reordered); a duplicate leaves a copy behind */
inline drecv() {
  PICK(dcnt, dovt);
  fs = dseq[i]; fp = dpay[i];
  if
  :: drem()
  :: CAN_DUP -> DUPED      /* duplicated: the copy stays in the network */
  fi
}
inline arecv() {
  PICK(acnt, aovt);
  fs = atyp[i]; fp = aval[i];
  if
  :: arem()
  :: CAN_DUP -> DUPED
  fi
}

inline asend(t, v) {
  atyp[acnt] = t; aval[acnt] = v; aovt[acnt] = 0; acnt++
}

/* ---- sender (table 1: ACK and NACK rows) ------------------------------ */
active proctype Sender() {
  do
  :: atomic {   /* (re)transmit slot tx: retransmission while tx < nxt */
       tx < N && tx < una + W && dcnt < CD ->
       dseq[dcnt] = tx % M; dpay[dcnt] = tx; dovt[dcnt] = 0; dcnt++;
       tx++;
       if :: tx > nxt -> nxt = tx :: else fi
     }
  :: atomic {   /* an ACK, NACK or NOBUF NACK arrives */
       acnt > 0 ->
       arecv();
       /* cumulative ack: accepted only if snd_una < ack <= snd_nxt; the
        * NACKs carry the same implied ACK of everything before their seq */
       d = SDIFF(fp, una % M);
       if
       :: d > 0 && d <= nxt - una ->
          una = una + d;
          assert(una <= expect);   /* never release what was not accepted */
          if :: tx < una -> tx = una :: else fi
       :: else                     /* ack <= snd_una: duplicate; ack > snd_nxt: bad */
       fi;
       /* NACK(seq): go back N if slot seq (now = snd_una) is INTRANSIT;
        * if it is already RETRANSMIT (tx == una) ignore.                */
       if
       :: fs != T_ACK && fp == una % M && una < nxt && tx > una -> tx = una
       :: else
       fi;
       fs = 0; fp = 0; d = 0; i = 0; j = 0
     }
  :: atomic {   /* retransmission timeout: nothing came back in time */
       acnt == 0 && una < nxt && tx > una -> tx = una
     }
  :: atomic {   /* the network loses an ACK/NACK */
       acnt > 0 && CAN_LOSE ->
       i = 0; do :: i + 1 < acnt -> i++ :: break od;
       arem(); LOST; i = 0; j = 0
     }
  :: una == N -> break
  od;
  assert(expect == N);
  sdone = true
}

/* ---- receiver NI (table 1: DATA rows, fig. 3 receive buffers) --------- */
active proctype Receiver() {
end:
  do
  :: atomic {
       dcnt > 0 && acnt < CA ->
       drecv();
       assert(rcnt < K);           /* a free slot to receive the frame into */
       d = SDIFF(fs, rnxt);
#if MUTANT == 1
       if :: d > 0 -> d = 0 :: else fi;   /* BUG: a gap frame taken as expected */
#endif
       if
       :: d == 0 ->                /* expected */
#if MUTANT == 2
          if :: rcnt < K ->        /* BUG: the last free slot is taken too */
#else
          if :: rcnt + 2 <= K ->   /* another slot still IDLE: accept */
#endif
             assert(fp == expect); /* exactly 0,1,2,...,N-1 accepted */
             expect++;
             rbuf[rcnt] = fp; rcnt++;
             rnxt = (fs + 1) % M;
             asend(T_ACK, rnxt)
          :: else ->               /* second-free-buffer rule: NOBUF, drop */
             asend(T_NOBUF, rnxt)
          fi
       :: d < 0 ->                 /* duplicate: our ACK was lost or late */
#if MUTANT == 3
          skip                     /* BUG: no re-ACK */
#else
          asend(T_ACK, rnxt)
#endif
       :: d > 0 ->                 /* gap: frames before it were lost */
          asend(T_NACK, rnxt)
       fi;
       fs = 0; fp = 0; d = 0; i = 0; j = 0
     }
  :: atomic {   /* the network loses a DATA frame */
       dcnt > 0 && CAN_LOSE ->
       i = 0; do :: i + 1 < dcnt -> i++ :: break od;
       drem(); LOST; i = 0; j = 0
     }
  od
}

/* ---- receiving host: drains READY slots in order ---------------------- */
active proctype Host() {
end:
  do
  :: rcnt > 0 ->
progress:
     atomic {
       assert(rbuf[0] == delivered);     /* exactly 0,1,2,...,N-1 */
       delivered++;
       j = 0;
       do
       :: j + 1 < rcnt -> rbuf[j] = rbuf[j+1]; j++
       :: else -> break
       od;
       rcnt--; rbuf[rcnt] = 0; j = 0
     }
  od
}

/* ---- liveness --------------------------------------------------------- */
#define all_done (sdone && delivered == N)
#ifdef LTL
ltl eventually_all_delivered { <> all_done }
#endif
