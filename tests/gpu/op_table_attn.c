/* The op table's cases of multi-head self-attention (op_table.h): attention_forward (probs and
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

/* Per-element bounds of the forward, dt = (qkv, probs, out) = (w, pdt, odt). Each backend's FP32
 * S is within 4 u dh sum_c |q k| / sqrt(dh) of the exact one and may round to another neighbour
 * in pdt (2 eps(pdt) |S|): e_S. P_j = e^(S_j - m) / sum moves by at most e_S_j + max e_S
 * relative, plus the sums of the softmax (mp_gpu_atol) and the exponential's inputs: eP of the
 * row; and P may round to another neighbour (rtol). out = sum_j P'_j v_j moves by
 * sum_j (eP + 2 eps(pdt)) P'_j |v_j|, by the GPU's rounding of P' to w (2 eps(w) P'_j |v_j|, when
 * P' is not probs itself) and by FP32 sums in another order (mp_gpu_atol). */
static void attn_fwd_bounds(const op_case *c, const mp_gpu_pair *qkv, double *bp, double *bo)
{
    const mp_attn_desc *d = &c->u.attn;
    attn_dims g = dims_of(c);
    mp_dtype w = c->dt[0], pdt = c->dt[1];
    bool own_p = d->dropout_p > 0 || pdt != w;
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
                double eP = 2 * emax + mp_gpu_atol(lim, 1) + 8 * U;
                int64_t prow = ((n * g.heads + h) * g.T + i) * g.T;
                for (int64_t j = 0; j < g.T; j++)
                    bp[prow + j] = j < lim ? eP * p[j] / sum : 0;
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
        attn_fwd_bounds(c, &qkv, bp, bo);
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
 * errors and their own sums' over T. */
static void attn_bwd_bounds(const op_case *c, const mp_gpu_pair *qkv, const mp_gpu_pair *probs,
                            const mp_gpu_pair *dout, double *bx)
{
    const mp_attn_desc *d = &c->u.attn;
    attn_dims g = dims_of(c);
    mp_dtype w = c->dt[0];
    double ew = 2 * mp_test_eps(w), eo = c->dt[2] != w ? ew : 0;
    bool own_p = d->dropout_p > 0 || c->dt[1] != w;
    int64_t tt = g.T * g.T;
    double *P = op_zeros(tt), *PP = op_zeros(tt), *eP = op_zeros(tt);
    double *dS = op_zeros(tt), *eS = op_zeros(tt);
    for (int64_t n = 0; n < g.N; n++)
        for (int64_t h = 0; h < g.heads; h++) {
            for (int64_t i = 0; i < g.T; i++) {
                int64_t lim = mp_attn_span(d->causal, g.T, i);
                double rs = 0, ers = 0, rabs = 0;
                double *dp = dS + i * g.T, *edp = eS + i * g.T; /* dP, e_dP first */
                for (int64_t j = 0; j < lim; j++) {
                    double mult = mult_of(d, &g, n, h, i, j), acc = 0, abs = 0;
                    for (int64_t k = 0; k < g.dh; k++) {
                        double t = op_hv(dout, (n * g.T + i) * g.D + h * g.dh + k) *
                                   op_hv(qkv, (n * g.T + j) * g.ld + 2 * g.D + h * g.dh + k);
                        acc += t, abs += fabs(t);
                    }
                    P[i * g.T + j] = op_hv(probs, ((n * g.heads + h) * g.T + i) * g.T + j);
                    PP[i * g.T + j] = P[i * g.T + j] * mult;
                    eP[i * g.T + j] = own_p ? ew * PP[i * g.T + j] : 0;
                    dp[j] = acc * mult;
                    edp[j] = (8 * U * (double)g.dh + eo) * abs * mult;
                    rs += dp[j] * P[i * g.T + j];
                    ers += edp[j] * P[i * g.T + j];
                    rabs += fabs(dp[j] * P[i * g.T + j]);
                }
                ers += 8 * U * (double)lim * rabs;
                for (int64_t j = 0; j < lim; j++) {
                    double pj = P[i * g.T + j], ds = pj * (dp[j] - rs);
                    eS[i * g.T + j] = pj * (edp[j] + ers) + (ew + 4 * U) * fabs(ds);
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
    free(P), free(PP), free(eP), free(dS), free(eS);
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
        attn_bwd_bounds(c, &qkv, &probs, &dout, bx);
        mp_gpu_check_each(&dqkv, bx, mp_gpu_rtol(c->dt[3]), "%s: dqkv", c->name);
        free(bx);
    }
    OP_FREE(&qkv, &dout, &probs, &out, &dqkv);
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
}
