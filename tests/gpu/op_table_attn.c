/* The op table's cases of multi-head self-attention (op_table.h): the tiled ops
 * (attention_flash_forward and _backward, op_cases_flash) and attention_forward (probs and
 * out) and attention_backward (dqkv, from the reference's probs on both sides) over sequences
 * of T = 1, 7 and 33 tokens (as H x W) and one of T = 40 with dh = 32, 1 to 4 heads of D = 12
 * (dh = 12, 6, 4, 3), causal or not, dropout 0 or 0.1, in FP32, fp16 and bf16, and mixes: FP32
 * probabilities of half qkv (O1), half probabilities of FP32 qkv, outputs and gradients in
 * another dtype; an empty batch; heads not dividing D (refused). Bounds are per element, worked
 * out in FP64 from the inputs (attn_fwd_bounds, attn_bwd_bounds): where the GPU rounds
 * differently from the CPU (engine/backend_cuda/attention.cu: S to a neighbour of probs' dtype,
 * P', dS and dout rounded to qkv's dtype, other orders of FP32 sums). */
#include "tests/gpu/op_table.h"

#include <math.h>
#include <stdlib.h>

#include "engine/attn_flash.h"
#include "engine/attn_geom.h"
#include "engine/dropout_mask.h"

static const mp_dtype F32 = MP_F32, F16 = MP_F16, BF16 = MP_BF16;
static const double U = 0x1p-24; /* FP32's unit roundoff */

/* The case's geometry and the dropout multiplier of (n, h, i, j). */
typedef struct attn_dims {
    int64_t N, T, D, heads, dh, ld;
    double scale;
} attn_dims;

static attn_dims dims_of(const op_case *c)
{
    attn_dims g;
    g.N = c->shape[0], g.T = c->shape[1] * c->shape[2], g.D = c->shape[3];
    g.heads = c->u.attn.heads;
    g.dh = g.heads > 0 && g.D % g.heads == 0 ? g.D / g.heads : 1;
    g.ld = 3 * g.D;
    g.scale = 1 / sqrt((double)g.dh);
    return g;
}

static double mult_of(const mp_attn_desc *d, const attn_dims *g, int64_t n, int64_t h,
                      int64_t i, int64_t j)
{
    if (d->dropout_p <= 0)
        return 1;
    uint64_t ctr = mp_attn_counter(d->offset, g->heads, g->T, n, h, i, j);
    return mp_dropout_keep(mp_dropout_key(d->seed), ctr, mp_dropout_threshold(d->dropout_p))
               ? 1 / (1 - d->dropout_p)
               : 0;
}

/* The tensors of a case: qkv (N, H, W, 3D), probs (N, heads, T, T), out and dout (N, H, W, D),
 * dqkv like qkv. */
static void attn_shapes(const op_case *c, int64_t qs[4], int64_t ps[4], int64_t os[4])
{
    attn_dims g = dims_of(c);
    const int64_t q4[4] = {g.N, c->shape[1], c->shape[2], 3 * g.D},
                  p4[4] = {g.N, g.heads > 0 ? g.heads : 1, g.T, g.T},
                  o4[4] = {g.N, c->shape[1], c->shape[2], g.D};
    for (int i = 0; i < 4; i++)
        qs[i] = q4[i], ps[i] = p4[i], os[i] = o4[i];
}

/* The relative error of the tiled ops' rescaling of a row's sum and accumulator (each key tile
 * multiplies them by an exponential within an ulp and rounds): 4 u per tile of 32 keys, the
 * smaller of the backends' tiles. */
static double rescale_err(int64_t T) { return 4 * U * (double)(T / 32 + 2); }

/* Per-element bounds of the forward, dt = (qkv, probs, out) = (w, pdt, odt). Each backend's FP32
 * S is within 4 u dh sum_c |q k| / sqrt(dh) of the exact one and may round to another neighbour
 * in pdt (2 eps(pdt) |S|): e_S. P_j = e^(S_j - m) / sum moves by at most e_S_j + max e_S
 * relative, plus the sums of the softmax (mp_gpu_atol) and the exponential's inputs: eP of the
 * row; and P may round to another neighbour (rtol). out = sum_j P'_j v_j moves by
 * sum_j (eP + 2 eps(pdt)) P'_j |v_j|, by the GPU's rounding of P' to w (2 eps(w) P'_j |v_j|, when
 * P' is not probs itself) and by FP32 sums in another order (mp_gpu_atol). With `flash` (the
 * tiled ops, pdt FP32): P' is not rounded (but by the tensor-core kernels, mp_attn_flash_mma:
 * to w, as the (T, T) path rounds it), each row's sum and accumulator carry the rescaling's
 * error (rescale_err), and bs (when not NULL) gets the stats' bounds; bp may be NULL. */
static void attn_fwd_bounds(const op_case *c, const mp_gpu_pair *qkv, bool flash, double *bp,
                            double *bo, double *bs)
{
    const mp_attn_desc *d = &c->u.attn;
    attn_dims g = dims_of(c);
    mp_dtype w = c->dt[0], pdt = c->dt[1];
    /* the tiled ops keep P' in FP32, but for their tensor-core kernels, which round it to w */
    bool own_p = flash ? mp_attn_flash_mma(w, g.dh) : d->dropout_p > 0 || pdt != w;
    double *s = op_zeros(g.T), *es = op_zeros(g.T), *p = op_zeros(g.T);
    for (int64_t n = 0; n < g.N; n++)
        for (int64_t h = 0; h < g.heads; h++)
            for (int64_t i = 0; i < g.T; i++) {
                int64_t lim = mp_attn_span(d->causal, g.T, i), qi = (n * g.T + i) * g.ld;
                double m = -INFINITY, sum = 0, emax = 0;
                for (int64_t j = 0; j < lim; j++) {
                    double acc = 0, abs = 0;
                    for (int64_t k = 0; k < g.dh; k++) {
                        double t = op_hv(qkv, qi + h * g.dh + k) *
                                   op_hv(qkv, (n * g.T + j) * g.ld + g.D + h * g.dh + k);
                        acc += t, abs += fabs(t);
                    }
                    s[j] = acc * g.scale;
                    es[j] = 4 * U * (double)g.dh * abs * g.scale +
                            2 * (mp_test_eps(pdt) + U) * fabs(s[j]);
                    m = fmax(m, s[j]);
                    emax = fmax(emax, es[j]);
                }
                for (int64_t j = 0; j < lim; j++)
                    sum += p[j] = exp(s[j] - m);
                double eP = 2 * emax + mp_gpu_atol(lim, 1) + 8 * U +
                            (flash ? rescale_err(g.T) : 0);
                int64_t prow = ((n * g.heads + h) * g.T + i) * g.T, srow = prow / g.T * 2;
                for (int64_t j = 0; j < g.T && bp; j++)
                    bp[prow + j] = j < lim ? eP * p[j] / sum : 0;
                if (bs) { /* m within both scores' errors, l = sum e^(S - m) within 2 eP */
                    bs[srow] = 2 * emax;
                    bs[srow + 1] = 2 * eP * sum;
                }
                for (int64_t k = 0; k < g.dh; k++) {
                    double e = 0, top = 0;
                    for (int64_t j = 0; j < lim; j++) {
                        double pj = p[j] / sum * mult_of(d, &g, n, h, i, j);
                        double vj = fabs(op_hv(qkv, (n * g.T + j) * g.ld + 2 * g.D + h * g.dh + k));
                        e += (eP + 2 * mp_test_eps(pdt) + (own_p ? 2 * mp_test_eps(w) : 0)) *
                             pj * vj;
                        top = fmax(top, pj * vj);
                    }
                    bo[(n * g.T + i) * g.D + h * g.dh + k] = e + mp_gpu_atol(lim, top);
                }
            }
    free(s), free(es), free(p);
}

/* probs and out from qkv; dt = (qkv, probs, out). */
static void run_attn_forward(const op_case *c)
{
    mp_rng r;
    mp_rng_seed(&r, 601, c->seed);
    int64_t qs[4], ps[4], os[4];
    attn_shapes(c, qs, ps, os);
    mp_gpu_pair qkv = mp_gpu_random(c->dt[0], 4, qs, &r, -1, 1);
    mp_gpu_pair probs = mp_gpu_poisoned(c->dt[1], 4, ps), out = mp_gpu_poisoned(c->dt[2], 4, os);
    OP_BOTH(c, attention_forward, &c->u.attn, OP_T(&qkv), OP_T(&probs), OP_T(&out));
    if (!c->refused) {
        double *bp = op_zeros(mp_tensor_numel(&probs.host));
        double *bo = op_zeros(mp_tensor_numel(&out.host));
        attn_fwd_bounds(c, &qkv, false, bp, bo, NULL);
        mp_gpu_check_each(&probs, bp, mp_gpu_rtol(c->dt[1]), "%s: probs", c->name);
        mp_gpu_check_each(&out, bo, mp_gpu_rtol(c->dt[2]), "%s: out", c->name);
        free(bp), free(bo);
    }
    OP_FREE(&qkv, &probs, &out);
}

/* Per-element bounds of dqkv, dt = (qkv, probs, dout, dqkv) with w = qkv's dtype, from the
 * shared probs P: the GPU rounds dout to w when its dtype differs (eo = 2 eps(w)), P' to w when
 * P' is not probs itself, and dS to w (2 eps(w)); FP32 sums of k terms may differ by 8 u k times
 * their absolute sum. dP' (sums over dh) is within (8 u dh + eo) sum_c |dO v|, dP is that times
 * the multiplier, the rowsum within sum_j e_dP P + 8 u lim sum_j |dP P|, and
 * dS = P (dP - rs) within P (e_dP + e_rs) + (2 eps(w) + 4 u) |dS|; dV, dQ and dK add their terms'
 * errors and their own sums' over T. With `flash` (the tiled ops): nothing is rounded to w (but
 * by the tensor-core kernels, mp_attn_flash_mma: P', dS and dout, as above), and
 * each side recomputes P from its own S (2 e_S relative, plus an ulp of the exponential), which
 * moves dV by that times P' |dO| and dS by that times |dS|. */
static void attn_bwd_bounds(const op_case *c, const mp_gpu_pair *qkv, const mp_gpu_pair *probs,
                            const mp_gpu_pair *dout, bool flash, double *bx)
{
    const mp_attn_desc *d = &c->u.attn;
    attn_dims g = dims_of(c);
    mp_dtype w = c->dt[0];
    /* the tiled ops round neither dS, P' nor dout to w, but for their tensor-core kernels */
    bool mma = flash && mp_attn_flash_mma(w, g.dh);
    double ew = flash && !mma ? 0 : 2 * mp_test_eps(w), eo = c->dt[2] != w ? ew : 0;
    bool own_p = mma || (!flash && (d->dropout_p > 0 || c->dt[1] != w));
    int64_t tt = g.T * g.T;
    double *P = op_zeros(tt), *PP = op_zeros(tt), *eP = op_zeros(tt);
    double *dS = op_zeros(tt), *eS = op_zeros(tt), *rel = op_zeros(g.T);
    for (int64_t n = 0; n < g.N; n++)
        for (int64_t h = 0; h < g.heads; h++) {
            for (int64_t i = 0; i < g.T; i++) {
                int64_t lim = mp_attn_span(d->causal, g.T, i);
                double rs = 0, ers = 0, rabs = 0;
                double *dp = dS + i * g.T, *edp = eS + i * g.T; /* dP, e_dP first */
                for (int64_t j = 0; j < lim; j++) {
                    double mult = mult_of(d, &g, n, h, i, j), acc = 0, abs = 0, sabs = 0;
                    for (int64_t k = 0; k < g.dh; k++) {
                        double t = op_hv(dout, (n * g.T + i) * g.D + h * g.dh + k) *
                                   op_hv(qkv, (n * g.T + j) * g.ld + 2 * g.D + h * g.dh + k);
                        acc += t, abs += fabs(t);
                        sabs += flash ? fabs(op_hv(qkv, (n * g.T + i) * g.ld + h * g.dh + k) *
                                             op_hv(qkv, (n * g.T + j) * g.ld + g.D + h * g.dh + k))
                                      : 0;
                    }
                    /* the tiled ops recompute P = e^(S - m) / l: each side's S within
                     * 4 u dh sum |q k| / sqrt(dh), the exponential within an ulp */
                    double ep = flash ? 8 * U * (double)g.dh * sabs * g.scale + 4 * U : 0;
                    P[i * g.T + j] = op_hv(probs, ((n * g.heads + h) * g.T + i) * g.T + j);
                    PP[i * g.T + j] = P[i * g.T + j] * mult;
                    eP[i * g.T + j] = (own_p ? ew : 0) * PP[i * g.T + j] + ep * PP[i * g.T + j];
                    rel[j] = ep;
                    dp[j] = acc * mult;
                    edp[j] = (8 * U * (double)g.dh + eo) * abs * mult;
                    rs += dp[j] * P[i * g.T + j];
                    ers += edp[j] * P[i * g.T + j];
                    rabs += fabs(dp[j] * P[i * g.T + j]);
                }
                ers += 8 * U * (double)lim * rabs;
                for (int64_t j = 0; j < lim; j++) {
                    double pj = P[i * g.T + j], ds = pj * (dp[j] - rs);
                    eS[i * g.T + j] = pj * (edp[j] + ers) + (ew + 4 * U + rel[j]) * fabs(ds);
                    dS[i * g.T + j] = ds;
                }
                for (int64_t j = lim; j < g.T; j++)
                    P[i * g.T + j] = PP[i * g.T + j] = eP[i * g.T + j] = dS[i * g.T + j] =
                        eS[i * g.T + j] = 0;
            }
            for (int64_t t = 0; t < g.T; t++)
                for (int64_t k = 0; k < g.dh; k++) {
                    double ev = 0, av = 0, eq = 0, aq = 0, ek = 0, ak = 0;
                    for (int64_t o = 0; o < g.T; o++) {
                        double dO = fabs(op_hv(dout, (n * g.T + o) * g.D + h * g.dh + k));
                        double kk = fabs(op_hv(qkv, (n * g.T + o) * g.ld + g.D + h * g.dh + k));
                        double qq = fabs(op_hv(qkv, (n * g.T + o) * g.ld + h * g.dh + k));
                        ev += (eP[o * g.T + t] + eo * PP[o * g.T + t]) * dO; /* dV[t] */
                        av += PP[o * g.T + t] * dO;
                        eq += eS[t * g.T + o] * kk; /* dQ[t] */
                        aq += fabs(dS[t * g.T + o]) * kk;
                        ek += eS[o * g.T + t] * qq; /* dK[t] */
                        ak += fabs(dS[o * g.T + t]) * qq;
                    }
                    double sumk = 8 * U * (double)g.T;
                    int64_t at = (n * g.T + t) * g.ld + h * g.dh + k;
                    bx[at] = g.scale * (eq + sumk * aq) + 2 * U * g.scale * aq;
                    bx[at + g.D] = g.scale * (ek + sumk * ak) + 2 * U * g.scale * ak;
                    bx[at + 2 * g.D] = ev + sumk * av;
                }
        }
    free(P), free(PP), free(eP), free(dS), free(eS), free(rel);
}

/* dqkv from the reference's probs (uploaded, so both sides read the same P); dt = (qkv, probs,
 * dout, dqkv). */
static void run_attn_backward(const op_case *c)
{
    mp_rng r;
    mp_rng_seed(&r, 602, c->seed);
    int64_t qs[4], ps[4], os[4];
    attn_shapes(c, qs, ps, os);
    mp_gpu_pair qkv = mp_gpu_random(c->dt[0], 4, qs, &r, -1, 1);
    mp_gpu_pair dout = mp_gpu_random(c->dt[2], 4, os, &r, -1, 1);
    mp_gpu_pair probs = mp_gpu_pair_alloc(c->dt[1], 4, ps);
    mp_gpu_pair out = mp_gpu_pair_alloc(c->dt[0], 4, os);
    mp_gpu_pair dqkv = mp_gpu_poisoned(c->dt[3], 4, qs);
    if (!c->refused) {
        assert_int_equal(op_ref->attention_forward(&c->u.attn, &qkv.host, &probs.host,
                                                   &out.host),
                         MP_OK);
        mp_gpu_upload(&probs);
    }
    OP_BOTH(c, attention_backward, &c->u.attn, OP_T(&qkv), OP_T(&probs), OP_T(&dout),
            OP_T(&dqkv));
    if (!c->refused) {
        double *bx = op_zeros(mp_tensor_numel(&dqkv.host));
        attn_bwd_bounds(c, &qkv, &probs, &dout, false, bx);
        mp_gpu_check_each(&dqkv, bx, mp_gpu_rtol(c->dt[3]), "%s: dqkv", c->name);
        free(bx);
    }
    OP_FREE(&qkv, &dout, &probs, &out, &dqkv);
}

/* The tiled forward: stats (FP32) and out from qkv on both sides; dt = (qkv, F32, out). Bounds:
 * attn_fwd_bounds with FP32 probabilities (the tiled ops never round S or P) and the rescaling's
 * error; stats: m within both sides' score errors, l within the probabilities' error. */
static void run_flash_forward(const op_case *c)
{
    mp_rng r;
    mp_rng_seed(&r, 603, c->seed);
    int64_t qs[4], ps[4], os[4];
    attn_shapes(c, qs, ps, os);
    const int64_t ss[4] = {ps[0], ps[1], ps[2], 2};
    mp_gpu_pair qkv = mp_gpu_random(c->dt[0], 4, qs, &r, -1, 1);
    mp_gpu_pair stats = mp_gpu_poisoned(MP_F32, 4, ss), out = mp_gpu_poisoned(c->dt[2], 4, os);
    OP_BOTH(c, attention_flash_forward, &c->u.attn, OP_T(&qkv), OP_T(&stats), OP_T(&out));
    if (!c->refused) {
        double *bo = op_zeros(mp_tensor_numel(&out.host));
        double *bs = op_zeros(mp_tensor_numel(&stats.host));
        attn_fwd_bounds(c, &qkv, true, NULL, bo, bs);
        mp_gpu_check_each(&stats, bs, mp_gpu_rtol(MP_F32), "%s: stats", c->name);
        mp_gpu_check_each(&out, bo, mp_gpu_rtol(c->dt[2]), "%s: out", c->name);
        free(bo), free(bs);
    }
    OP_FREE(&qkv, &stats, &out);
}

/* The tiled backward from the reference's tiled forward (out and stats uploaded, so both sides
 * read the same), dt = (qkv, F32, dout, dqkv), out in qkv's dtype. Bounds: attn_bwd_bounds with
 * the probabilities of the (T, T) path in FP32 (their size) and the recomputed P's error. */
static void run_flash_backward(const op_case *c)
{
    mp_rng r;
    mp_rng_seed(&r, 604, c->seed);
    int64_t qs[4], ps[4], os[4];
    attn_shapes(c, qs, ps, os);
    const int64_t ss[4] = {ps[0], ps[1], ps[2], 2};
    mp_gpu_pair qkv = mp_gpu_random(c->dt[0], 4, qs, &r, -1, 1);
    mp_gpu_pair dout = mp_gpu_random(c->dt[2], 4, os, &r, -1, 1);
    mp_gpu_pair stats = mp_gpu_pair_alloc(MP_F32, 4, ss), out = mp_gpu_pair_alloc(c->dt[0], 4, os);
    mp_gpu_pair probs = mp_gpu_pair_alloc(MP_F32, 4, ps), o32 = mp_gpu_pair_alloc(MP_F32, 4, os);
    mp_gpu_pair dqkv = mp_gpu_poisoned(c->dt[3], 4, qs);
    if (!c->refused) {
        assert_int_equal(op_ref->attention_flash_forward(&c->u.attn, &qkv.host, &stats.host,
                                                         &out.host),
                         MP_OK);
        assert_int_equal(op_ref->attention_forward(&c->u.attn, &qkv.host, &probs.host,
                                                   &o32.host),
                         MP_OK);
        mp_gpu_upload(&stats);
        mp_gpu_upload(&out);
    }
    OP_BOTH(c, attention_flash_backward, &c->u.attn, OP_T(&qkv), OP_T(&out), OP_T(&stats),
            OP_T(&dout), OP_T(&dqkv));
    if (!c->refused) {
        double *bx = op_zeros(mp_tensor_numel(&dqkv.host));
        attn_bwd_bounds(c, &qkv, &probs, &dout, true, bx);
        mp_gpu_check_each(&dqkv, bx, mp_gpu_rtol(c->dt[3]), "%s: dqkv", c->name);
        free(bx);
    }
    OP_FREE(&qkv, &dout, &stats, &out, &probs, &o32, &dqkv);
}

/* Adds the tiled ops' forward and backward cases of one geometry: qkv, out, dout and dqkv of
 * dtype t, or (mixed) out, dout and dqkv FP32 beside half qkv. */
static void add_flash(mp_dtype t, bool mixed, const int64_t shape[4], int heads, bool causal,
                      double p, bool refused)
{
    mp_attn_desc d = {.heads = heads, .causal = causal, .dropout_p = p, .seed = 8765, .offset = 7};
    mp_dtype o = mixed ? MP_F32 : t;
    const mp_dtype dts[2][4] = {{t, MP_F32, o, MP_F32}, {t, MP_F32, o, o}};
    for (int b = 0; b < 2; b++) {
        op_case c = {.run = b ? run_flash_backward : run_flash_forward, .u.attn = d,
                     .refused = refused};
        for (int i = 0; i < 4; i++)
            c.dt[i] = dts[b][i], c.shape[i] = shape[i];
        op_add(c, b ? "attention_flash_backward" : "attention_flash_forward", b ? 4 : 3, 4,
               "heads %d%s dropout %g%s", heads, causal ? " causal" : "", p,
               refused ? " (refused)" : "");
    }
}

/* The tiled ops over T = 1, 7, 129 and 1000 tokens (one key tile, several, a partial one), two
 * heads of D = 12 and one of 64 and of 128 (T = 129: MP_ATTN_FLASH_MAX_DH; in half types the
 * tensor-core kernels), causal or not, dropout 0 or 0.1, in each dtype; FP32 outputs of half
 * qkv (also at dh = 32, tensor cores); two heads of 16 over 1000 tokens in half types (tensor
 * cores); an empty batch; a head wider than MP_ATTN_FLASH_MAX_DH (refused). */
static void op_cases_flash(void)
{
    static const int64_t hw[4][2] = {{1, 1}, {7, 1}, {3, 43}, {40, 25}};
    for (int k = 0; k < MP_GPU_NDTYPES; k++)
        for (int mode = 0; mode < 4; mode++) {
            bool causal = mode & 1;
            double p = mode & 2 ? 0.1 : 0.0;
            for (int s = 0; s < 4; s++) {
                const int64_t shape[4] = {s == 3 ? 1 : 2, hw[s][0], hw[s][1], 12};
                add_flash(mp_gpu_dtypes[k], false, shape, 2, causal, p, false);
            }
            const int64_t wide[4] = {1, 3, 43, 64}, widest[4] = {1, 3, 43, 128};
            add_flash(mp_gpu_dtypes[k], false, wide, 1, causal, p, false);
            add_flash(mp_gpu_dtypes[k], false, widest, 1, causal, p, false); /* dh = 128 */
        }
    const int64_t mixed[4] = {2, 3, 11, 12}, empty[4] = {0, 3, 1, 12}, huge[4] = {1, 2, 1, 129};
    add_flash(MP_F16, true, mixed, 3, true, 0.1, false);
    add_flash(MP_BF16, true, mixed, 3, false, 0.0, false);
    /* the tensor-core kernels (mp_attn_flash_mma) at dh = 32 with FP32 outputs, and at dh = 16
       over 1000 tokens (16 key tiles, the last partial) */
    const int64_t mixed_mma[4] = {2, 3, 11, 64}, long_mma[4] = {1, 40, 25, 32};
    add_flash(MP_F16, true, mixed_mma, 2, true, 0.1, false);
    add_flash(MP_BF16, true, mixed_mma, 2, false, 0.0, false);
    add_flash(MP_F16, false, long_mma, 2, true, 0.1, false);
    add_flash(MP_BF16, false, long_mma, 2, false, 0.0, false);
    add_flash(MP_F16, false, empty, 2, true, 0.1, false);
    add_flash(MP_F32, false, huge, 1, false, 0.0, true); /* dh = 129 */
}

/* Adds the forward and backward cases of one geometry and dtype set: fwd = (qkv, probs, out),
 * bwd = (qkv, probs, dout, dqkv). */
static void add_attn(const mp_dtype fwd[3], const mp_dtype bwd[4], const int64_t shape[4],
                     int heads, bool causal, double p, bool refused)
{
    mp_attn_desc d = {.heads = heads, .causal = causal, .dropout_p = p, .seed = 4321, .offset = 99};
    const char *mode = causal ? " causal" : "";
    for (int b = 0; b < 2; b++) {
        op_case c = {.run = b ? run_attn_backward : run_attn_forward, .u.attn = d,
                     .refused = refused};
        for (int i = 0; i < 4; i++) {
            c.dt[i] = b ? bwd[i] : i < 3 ? fwd[i] : MP_F32;
            c.shape[i] = shape[i];
        }
        op_add(c, b ? "attention_backward" : "attention_forward", b ? 4 : 3, 4,
               "heads %d%s dropout %g%s", heads, mode, p, refused ? " (refused)" : "");
    }
}

void op_cases_attn(void)
{
    static const int64_t hw[3][2] = {{1, 1}, {7, 1}, {3, 11}}; /* T = 1, 7, 33 */
    for (int k = 0; k < MP_GPU_NDTYPES; k++) {
        mp_dtype t = mp_gpu_dtypes[k];
        const mp_dtype fwd[3] = {t, t, t}, bwd[4] = {t, t, t, t};
        for (int s = 0; s < 3; s++)
            for (int heads = 1; heads <= 4; heads++)
                for (int mode = 0; mode < 4; mode++) {
                    const int64_t shape[4] = {2, hw[s][0], hw[s][1], 12};
                    add_attn(fwd, bwd, shape, heads, mode & 1, mode & 2 ? 0.1 : 0.0, false);
                }
        const int64_t wide[4] = {2, 5, 8, 64}; /* T = 40, dh = 32 */
        add_attn(fwd, bwd, wide, 2, true, 0.1, false);
        add_attn(fwd, bwd, wide, 2, false, 0.0, false);
    }
    static const struct {
        mp_dtype fwd[3], bwd[4];
    } mixes[] = {
        {{F16, F32, F16}, {F16, F32, F16, F16}},    /* O1: FP32 probabilities of half qkv */
        {{BF16, F32, F32}, {BF16, F32, F32, F32}},  /* and FP32 outputs */
        {{F32, F16, F32}, {F32, F16, F32, F32}},    /* half probabilities of FP32 qkv */
        {{F16, BF16, BF16}, {F16, F16, BF16, BF16}}, /* outputs in another half type */
        {{BF16, BF16, F16}, {BF16, BF16, F32, F16}},
    };
    const int64_t mixed[4] = {2, 3, 11, 12};
    for (size_t m = 0; m < sizeof mixes / sizeof mixes[0]; m++)
        for (int mode = 0; mode < 4; mode++)
            add_attn(mixes[m].fwd, mixes[m].bwd, mixed, 3, mode & 1, mode & 2 ? 0.1 : 0.0,
                     false);
    const mp_dtype hf[3] = {F16, F16, F16}, hb[4] = {F16, F16, F16, F16};
    const int64_t empty[4] = {0, 3, 1, 12}, odd[4] = {2, 3, 1, 12};
    add_attn(hf, hb, empty, 2, true, 0.1, false); /* no sequences: nothing to do */
    add_attn(hf, hb, odd, 5, false, 0.0, true);   /* 5 heads do not divide D = 12 */
    op_cases_flash();
}
