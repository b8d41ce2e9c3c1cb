/* The op list (docs/ARCHITECTURE.md §5): every op of the backend table, declared once as
 * MP_OP(return type, name, (parameters)) with its contract. Including this file with MP_OP
 * defined generates the fields of mp_ops (engine/ops.h), the declarations of each backend's
 * functions mp_cpu_<name> and mp_cuda_<name> (engine/backend_cpu/cpu.h,
 * engine/backend_cuda/cuda.h) and both op tables, so an op is added in one place. Deliberately
 * without an include guard; it undefines MP_OP at its end.
 *
 * Conventions (engine/ops.h): inputs stored in half are widened to FP32 and arithmetic
 * accumulates in FP32 (FP64 for FP64 tensors), each output element is rounded once to its
 * tensor's dtype; 2-D ops read a tensor as (shape[0], numel / shape[0]); compute ops return
 * MP_OK, or MP_EINTERNAL for shapes that do not match. */

/* Backend memory: a zeroed block of `bytes` counted under `cat` (mp_mem_current), or NULL
 * when the device is out of memory (host memory aborts instead, as mp_alloc); mem_free
 * frees one (NULL is ignored). */
MP_OP(void *, mem_alloc, (size_t bytes, mp_mem_cat cat))
MP_OP(void, mem_free, (void *p))

/* Host memory that copy_in reads fastest (pinned on CUDA, so the copy runs asynchronously:
 * the block must stay unchanged until a later copy_out or sync returns; mp_alloc's on the
 * CPU), zeroed and counted, or NULL; host_free frees one (NULL is ignored). */
MP_OP(void *, host_alloc, (size_t bytes, mp_mem_cat cat))
MP_OP(void, host_free, (void *p))

/* Copies `bytes` from host memory into backend memory (copy_in), from backend memory into
 * host memory (copy_out, which waits for the ops queued before it), or within backend
 * memory (copy). */
MP_OP(mp_status, copy_in, (void *dst, const void *host, size_t bytes))
MP_OP(mp_status, copy_out, (void *host, const void *src, size_t bytes))
MP_OP(mp_status, copy, (void *dst, const void *src, size_t bytes))

/* Waits until every queued op has finished, and reports a failure of any of them. */
MP_OP(mp_status, sync, (void))

/* Fences: a point in the backend's queue that another thread can wait for. fence_record
 * creates *fence when it is NULL (it may stay NULL on a backend that queues nothing) and
 * marks the end of the work queued so far; fence_wait waits (from any thread) until that
 * work has finished; fence_free frees one (NULL is ignored). On CUDA a fence is a
 * cudaEvent_t. */
MP_OP(mp_status, fence_record, (void **fence))
MP_OP(mp_status, fence_wait, (void *fence))
MP_OP(void, fence_free, (void *fence))

/* Clock marks, for the device time of a stretch of the queue: mark_record creates *mark when
 * NULL and stamps it with the time at which the work queued so far has finished (CUDA: a timing
 * event recorded on the backend's stream; the CPU, which queues nothing: the host clock now);
 * mark_elapsed waits for `to` and sets *ms to the time from `from` to `to` in milliseconds (the
 * device's clock, its idle gaps included; both marks recorded); mark_free frees one (NULL is
 * ignored). A mark's wait is counted as a fence wait. */
MP_OP(mp_status, mark_record, (void **mark))
MP_OP(mp_status, mark_elapsed, (void *from, void *to, double *ms))
MP_OP(void, mark_free, (void *mark))

/* Graphs (CUDA graphs): graph_begin starts capturing the ops the calling thread queues: from
 * then on each is recorded with its arguments as they are at the call (scalars and memory
 * pointers as given, copy_in's host pointer read at each launch, the tensor and descriptor
 * structs copied as a kernel's parameters are) and nothing runs. An op that waits for the queue
 * or hands a value to the host (copy_out, sync, fence_record, fence_wait, mark_record,
 * mark_elapsed, grad_stats, softmax_xent with out), allocates or frees backend memory
 * (mem_alloc, mem_free, an op that would grow its workspace) or copies in from host memory not
 * from host_alloc fails while capturing (or, returning no status, fails the capture), and the
 * capture then fails at graph_end, its message the first failure's. graph_end ends the capture and sets *graph to it (NULL on failure);
 * graph_launch queues every recorded op in order with its recorded arguments, the ops'
 * results in place once a later copy_out or sync returns; graph_free frees one (NULL ignored).
 * CUDA captures its stream; the staged CPU backend records and replays the same way; the plain
 * CPU backend, which queues nothing, has none (graph_begin: MP_EUSAGE). */
MP_OP(mp_status, graph_begin, (void))
MP_OP(mp_status, graph_end, (void **graph))
MP_OP(mp_status, graph_launch, (void *graph))
MP_OP(void, graph_free, (void *graph))

/* Whether a graph still holds the memory it was captured with: false once the backend has moved
 * a workspace since (an op at another shape grew one, freeing the block the graph's nodes
 * point at); launch only a graph that is, else capture anew. On the staged CPU backend, which
 * looks its workspaces up again at each launch, it says whether one grew, so that callers'
 * re-capture runs in CI. */
MP_OP(bool, graph_valid, (const void *graph))

/* A host call in the queue's order, for what a graph holds that is no op (the staged CPU
 * backend's collectives: comm/comm_device.c): on the staged CPU backend inside a capture,
 * fn is recorded with a copy of the `bytes` at arg and called with that copy in its place at
 * each launch (its failure fails the launch); outside a capture, and on the plain CPU backend,
 * fn(arg) runs now. CUDA refuses it (MP_EUSAGE): a collective in a CUDA graph is NCCL's own
 * node, captured from the communication stream. */
MP_OP(mp_status, graph_call, (mp_status (*fn)(const void *arg), const void *arg, size_t bytes))

/* The backend's native queue (CUDA: its cudaStream_t), for a transport that orders its own
 * work after it (comm/transport_nccl.c); NULL on the CPU. */
MP_OP(void *, queue, (void))

/* Copies the counters of host waits into *out (mp_ops_counters). */
MP_OP(void, counters, (mp_ops_counters *out))

/* Bytes of backend memory free now, or -1 when the backend does not know (the CPU: the
 * caller judges host memory itself). */
MP_OP(int64_t, mem_free_bytes, (void))

/* Bytes of the device in use now by every process on it (cudaMemGetInfo's total - free: the
 * contexts, the libraries' own allocations and every allocator's reserve included), or -1 where
 * the backend does not know (the CPU). */
MP_OP(int64_t, mem_used_bytes, (void))

/* c (m, n) = alpha * op(a) * op(b) + beta * c, op(a) (m, k), op(b) (k, n); op transposes
 * when ta / tb. a, b and c may mix FP32, fp16 and bf16; FP64 only with FP64. */
MP_OP(mp_status, gemm, (bool ta, bool tb, double alpha, const mp_tensor *a, const mp_tensor *b,
                        double beta, mp_tensor *c))

/* c (m, n) = op(a) op(b) + bias (n) broadcast over rows: gemm(ta, tb, 1, a, b, 0, c) then
 * bias_add(c, bias), except that a backend may add the bias in the product's epilogue
 * (cuBLASLt), rounding c once instead of twice. The linear layer's forward. */
MP_OP(mp_status, gemm_bias, (bool ta, bool tb, const mp_tensor *a, const mp_tensor *b,
                             const mp_tensor *bias, mp_tensor *c))

/* y (N, C) += b (C) broadcast over rows. */
MP_OP(mp_status, bias_add, (mp_tensor *y, const mp_tensor *b))

/* db (C) = sum over rows of dy (N, C). */
MP_OP(mp_status, bias_grad, (const mp_tensor *dy, mp_tensor *db))

/* The linear layer's backward, dy (N, out), x (N, in), w (out, in): dw (out, in) = dy^T x,
 * then db (out) = sum over rows of dy when db is not NULL, then dx (N, in) = dy w when dx is
 * not NULL; the results of gemm(true, false, 1, dy, x, 0, dw), bias_grad(dy, db) and
 * gemm(false, false, 1, dy, w, 0, dx) bit for bit, in one op so that a backend reads dy once
 * (the CPU widens a half dy once for those GEMMs that would each widen it). */
MP_OP(mp_status, linear_backward, (const mp_tensor *x, const mp_tensor *w, const mp_tensor *dy,
                                   mp_tensor *dw, mp_tensor *db, mp_tensor *dx))

/* y = max(x, 0), elementwise (NaN propagates); x and y same numel (may alias). */
MP_OP(mp_status, relu_forward, (const mp_tensor *x, mp_tensor *y))

/* dx = dy where y > 0, else 0 (y is the forward output); may alias dy. */
MP_OP(mp_status, relu_backward, (const mp_tensor *y, const mp_tensor *dy, mp_tensor *dx))

/* Softmax cross-entropy of logits (N, C) against labels (N) in [0, C) with label smoothing
 * eps (PyTorch's: the target is (1 - eps) onehot + eps / C), computed in FP32 (FP64 for
 * FP64 logits) with engine/xent_rule.h's rules. When out is not NULL, fills *out with the
 * mean loss and the arg-max hit count (the arg-max is the first maximum, a NaN above any
 * number), and the host waits for them; NULL queues nothing for the host. When dlogits is
 * not NULL, writes d(mean loss * g)/dlogits into it (N, C), g = grad_scale times the loss
 * scale read from `st` in backend memory (st NULL: g = grad_scale). A label outside [0, C)
 * is an error (MP_EINTERNAL): where the backend sees it without waiting (the CPU) the op
 * fails at once and writes nothing; otherwise (CUDA) the row's dlogits are zeroed,
 * st->found_inf is set (when st is given) so that the step is skipped, and the op fails at
 * its next call with a result. */
MP_OP(mp_status, softmax_xent, (const mp_tensor *logits, const int32_t *labels, double smoothing,
                                double grad_scale, mp_amp_state *st, mp_xent_result *out,
                                mp_tensor *dlogits))

/* One optimizer step in a single pass over flat tensors of equal numel: param (updated in
 * its precision's arithmetic: FP32 for FP32 and half, FP64 for FP64) from grad (any dtype,
 * times args->grad_scale); when copy is not NULL it receives the new param rounded to its
 * dtype (the half model copy of FP32 master weights). slot1 (SGD momentum, Adam's first
 * moment) and slot2 (Adam's second moment) have param's numel, FP32 (FP64 with FP64
 * params); those the optimizer does not use may be NULL (SGD with momentum 0, slot2 for SGD).
 * With an mp_amp_state `st` (NULL: none) the step reads it instead of taking the host's
 * word: it does nothing when st->found_inf is set, multiplies gradients by
 * args->grad_scale / scale, times the clipping coefficient from st->sumsq when
 * args->max_norm > 0, and counts the step as st->steps + 1 (args->step is ignored). */
MP_OP(mp_status, optim_step, (const mp_optim_args *args, const mp_amp_state *st, mp_tensor *param,
                              mp_tensor *copy, const mp_tensor *grad, mp_tensor *slot1,
                              mp_tensor *slot2))

/* The fused unscale-and-check over one flat gradient buffer: with g * (mult / scale)
 * computed per element in FP32 (FP64 for FP64), adds its sum of squares (accumulated in
 * FP64, in an order the backend chooses) to st->sumsq and sets st->found_inf when any
 * element is inf or NaN. With limit > 0 (the largest finite value of the half type the
 * gradient was stored or sent in), raises st->fill to max|g| / limit of the stored values
 * (the scaler's margin rule, engine/scaler.h); limit 0 leaves fill alone. The gradient
 * itself is not written. */
MP_OP(mp_status, amp_check, (const mp_tensor *grad, double mult, double limit, mp_amp_state *st))

/* When st->found_inf is set (the step is skipped), copies saved into live (equal numel and
 * dtype); otherwise nothing. Reads the flag in backend memory: no host wait. */
MP_OP(mp_status, amp_revert, (const mp_amp_state *st, const mp_tensor *saved, mp_tensor *live))

/* The values of the step about to run that ops read from the state: st->lr = lr and
 * st->mask_step = step, queued like the other ops (the values travel as the op's arguments, a
 * kernel parameter on CUDA): an optimizer step queued after it with
 * mp_optim_args.lr_from_state uses this rate, and dropout given &st->mask_step draws this
 * step's masks, also inside a graph captured before. */
MP_OP(mp_status, amp_step_values, (mp_amp_state *st, double lr, int64_t step))

/* Ends a step: mp_amp_state_update (engine/amp_state.h). Returns MP_OK; whether the run
 * diverged is read from the state (consecutive_skips). */
MP_OP(mp_status, amp_update, (const mp_scaler_config *c, mp_amp_state *st))

/* Adds the sum of squares of (grad * scale), computed per element in FP32 (FP64 for FP64)
 * and accumulated in FP64, to *sumsq, and sets *nonfinite when any scaled element is inf or
 * NaN. One pass; used for the overflow check and the global gradient norm. */
MP_OP(mp_status, grad_stats, (const mp_tensor *grad, double scale, double *sumsq, bool *nonfinite))

/* x *= alpha, elementwise. */
MP_OP(mp_status, scale, (mp_tensor *x, double alpha))

/* Every element of x = value (rounded to x's dtype). */
MP_OP(mp_status, fill, (mp_tensor *x, double value))

/* dst = src rounded to dst's dtype; equal numel. src and dst do not overlap, unless they are the
 * same storage with the same dtype (a no-op): the CPU converts pieces on several threads. */
MP_OP(mp_status, convert, (const mp_tensor *src, mp_tensor *dst))

/* y = a + b elementwise (residual connections); equal numel, any dtypes. */
MP_OP(mp_status, add, (const mp_tensor *a, const mp_tensor *b, mp_tensor *y))

/* y = relu(a + b) (the residual sum followed by a ReLU): the bits of add(a, b, y) then
 * relu_forward(y, y) in one pass (engine/elem_rule.h: ReLU commutes with the rounding). Its
 * backward is relu_backward on y. */
MP_OP(mp_status, add_relu, (const mp_tensor *a, const mp_tensor *b, mp_tensor *y))

/* Convolution (mp_conv_desc): y = conv(x, w); dx = conv_transpose(dy, w);
 * dw = correlation of x with dy. Outputs are overwritten. The one exception to rounding
 * once: cuDNN computes in one dtype, so where the inputs are half and the output FP32 (O1's
 * weight gradient) the CUDA backend rounds to half first, as PyTorch's autocast does. */
MP_OP(mp_status, conv2d_forward, (const mp_conv_desc *d, const mp_tensor *x, const mp_tensor *w,
                                  mp_tensor *y))
MP_OP(mp_status, conv2d_backward_data, (const mp_conv_desc *d, const mp_tensor *dy,
                                        const mp_tensor *w, mp_tensor *dx))
MP_OP(mp_status, conv2d_backward_filter, (const mp_conv_desc *d, const mp_tensor *x,
                                          const mp_tensor *dy, mp_tensor *dw))
/* Both gradients of one convolution from one dy, as PyTorch's convolution_backward: dw as
 * conv2d_backward_filter(d, x, dy, dw) computes it, then, unless dx is NULL (w is then
 * unused), dx as conv2d_backward_data(d, dy, w, dx) does (on the CPU bit for bit). A backend
 * that converts dy for its working precision does it once for both (the CPU's half levels). */
MP_OP(mp_status, conv2d_backward, (const mp_conv_desc *d, const mp_tensor *x, const mp_tensor *w,
                                   const mp_tensor *dy, mp_tensor *dw, mp_tensor *dx))

/* Batch normalisation (mp_bn_args). x, y (N, H, W, C) in any dtype; running_mean,
 * running_var, save_mean, save_invstd (C) in FP32 (FP64 in tests); gamma, beta and their
 * gradients in FP32, or half at O3 without keep_batchnorm_fp32.
 * Training fills save_mean/save_invstd for backward and updates the running statistics;
 * evaluation (train == false) reads the running statistics and leaves save_* alone. With
 * a->relu, y = relu(BatchNorm(x)): the bits of the op without it then relu_forward(y, y). */
MP_OP(mp_status, batchnorm_forward, (const mp_bn_args *a, bool train, const mp_tensor *x,
                                     const mp_tensor *gamma, const mp_tensor *beta,
                                     mp_tensor *running_mean, mp_tensor *running_var,
                                     mp_tensor *save_mean, mp_tensor *save_invstd, mp_tensor *y))
/* Gradients of training-mode batch normalisation: dx (NULL for none; may alias dy), dgamma,
 * dbeta (overwritten), from the save_mean/save_invstd of the training forward. `a` is the one
 * that forward was given (its eps must be > 0); the result depends only on the saved
 * statistics, and momentum is unused. With a->relu, y is that forward's output (x's shape and
 * dtype) and dy passes only where y > 0: the bits of relu_backward(y, dy, g) then this op
 * without relu on g; without, y is not read (NULL allowed). */
MP_OP(mp_status, batchnorm_backward, (const mp_bn_args *a, const mp_tensor *x, const mp_tensor *y,
                                      const mp_tensor *dy,
                                      const mp_tensor *gamma, const mp_tensor *save_mean,
                                      const mp_tensor *save_invstd, mp_tensor *dx,
                                      mp_tensor *dgamma, mp_tensor *dbeta))

/* Pooling (mp_pool_desc): forward, and dx from x, y and dy (max pooling routes each dy to
 * the first maximum of its window; average pooling spreads it evenly). y must be
 * pool_forward's output for x, in x's dtype: a backend may find the maxima from it. */
MP_OP(mp_status, pool_forward, (const mp_pool_desc *d, const mp_tensor *x, mp_tensor *y))
MP_OP(mp_status, pool_backward, (const mp_pool_desc *d, const mp_tensor *x, const mp_tensor *y,
                                 const mp_tensor *dy, mp_tensor *dx))

/* Inverted dropout with probability p: element i of the tensor is kept when a counter-based
 * hash of (seed, o + i) says so, and scaled by 1 / (1 - p), o = mp_mask_offset(offset, step)
 * (engine/dropout_mask.h: step NULL, or the backend's memory holding the step index, read when
 * the op runs, so step must stay valid while a graph that captured the op exists); the same
 * (seed, o) gives the same mask on every backend, so backward recomputes it instead of storing
 * it. x and y (dy and dx) of equal numel and dtype, may alias. */
MP_OP(mp_status, dropout_forward, (double p, uint64_t seed, uint64_t offset, const int64_t *step,
                                   const mp_tensor *x, mp_tensor *y))
MP_OP(mp_status, dropout_backward, (double p, uint64_t seed, uint64_t offset,
                                    const int64_t *step, const mp_tensor *dy, mp_tensor *dx))

/* LayerNorm over the last dimension C = numel(gamma): x and y are read as (numel / C, C) rows,
 * any dtype each. PyTorch's semantics: per row mean and biased variance accumulated in FP32
 * (FP64 for FP64 x), invstd = 1 / sqrt(var + eps), y = (x - mean) * invstd * gamma + beta,
 * rounded once. gamma, beta (C) FP32, or half at O3 without keep_norm_fp32. Nothing is saved:
 * backward recomputes the statistics from x exactly as forward does. y may not alias x. */
MP_OP(mp_status, layernorm_forward, (double eps, const mp_tensor *x, const mp_tensor *gamma,
                                     const mp_tensor *beta, mp_tensor *y))

/* Gradients of layernorm_forward: dx (NULL: none) = invstd (g - mean(g) - xhat mean(g xhat))
 * with g = dy gamma per row; dgamma = sum over rows of dy xhat, dbeta = sum over rows of dy,
 * in a fixed order (deterministic), overwritten; each rounded once to its dtype. dx may alias
 * neither x nor dy. */
MP_OP(mp_status, layernorm_backward, (double eps, const mp_tensor *x, const mp_tensor *dy,
                                      const mp_tensor *gamma, mp_tensor *dx, mp_tensor *dgamma,
                                      mp_tensor *dbeta))

/* GELU in its tanh form (PyTorch's approximate='tanh'):
 * y = 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), in FP32 (FP64 for FP64); x and y of
 * equal numel, may alias. */
MP_OP(mp_status, gelu_forward, (const mp_tensor *x, mp_tensor *y))

/* dx = dy gelu'(x), x the forward's input; dx may alias dy. */
MP_OP(mp_status, gelu_backward, (const mp_tensor *x, const mp_tensor *dy, mp_tensor *dx))

/* Token embedding: ids (any float dtype, numel R) hold integers in [0, V); table (V, D); y read
 * as (R, D): row r = table[ids[r]] rounded to y's dtype. The CPU fails (MP_EINTERNAL, nothing
 * written) for an id that is not an integer in [0, V); CUDA writes a zero row for it. */
MP_OP(mp_status, embedding_forward, (const mp_tensor *ids, const mp_tensor *table,
                                     mp_tensor *y))

/* dtable (V, D) = [dtable +] the sum over rows r with ids[r] == v of dy[r] (dy read as (R, D)),
 * accumulated in FP32 (FP64) in increasing r and rounded once; with `accumulate` the old value
 * is the first term of the sum (a weight shared with another layer). Deterministic. An id that
 * is not an integer in [0, V): the CPU fails (MP_EINTERNAL, nothing written), CUDA skips it. */
MP_OP(mp_status, embedding_backward, (const mp_tensor *ids, const mp_tensor *dy,
                                      bool accumulate, mp_tensor *dtable))

/* Multi-head self-attention (mp_attn_desc; engine/attn_geom.h checks the geometry): qkv
 * (N, H, W, 3D) holds N sequences of T = H W tokens, each row [q (D) | k (D) | v (D)], head h
 * reading columns h dh .. (h + 1) dh - 1 of each part, dh = D / heads; probs (N, heads, T, T);
 * out (N, H, W, D). S = Q_h K_h^T / sqrt(dh) accumulated in FP32 (FP64) and rounded to probs'
 * dtype (where fp16 can overflow); causal: S[i][j], j > i, is masked (P = 0 exactly);
 * P = softmax over j in FP32 from the rounded S, rounded to probs' dtype and stored; with
 * dropout P' = P keep / (1 - p) (the mask of dropout_forward at counter offset +
 * ((n heads + h) T + i) T + j), else P' = P; out = P' V_h accumulated in FP32, rounded once. */
MP_OP(mp_status, attention_forward, (const mp_attn_desc *d, const mp_tensor *qkv,
                                     mp_tensor *probs, mp_tensor *out))

/* Gradients of attention_forward from its qkv and probs: dqkv (N, H, W, 3D) overwritten with
 * dP' = dO V^T, dP = dP' keep / (1 - p), dV = P'^T dO, dS = P o (dP - rowsum(dP o P)),
 * dQ = dS K / sqrt(dh), dK = dS^T Q / sqrt(dh), accumulated in FP32 and rounded once. */
MP_OP(mp_status, attention_backward, (const mp_attn_desc *d, const mp_tensor *qkv,
                                      const mp_tensor *probs, const mp_tensor *dout,
                                      mp_tensor *dqkv))

/* attention_forward's out without its (T, T) probabilities (engine/attn_flash.h): over key
 * tiles, an online softmax keeps per row its maximum m and sum l, stored in stats
 * (N, heads, T, 2) of mp_attn_flash_stats_dtype; S and P stay in FP32 (FP64), never rounded to a
 * half dtype; out = (sum_j P_j keep_j / (1 - p) V_j) accumulated in FP32, rounded once. The
 * dropout mask is attention_forward's. Memory grows with T, not T^2. */
MP_OP(mp_status, attention_flash_forward, (const mp_attn_desc *d, const mp_tensor *qkv,
                                           mp_tensor *stats, mp_tensor *out))

/* Gradients of attention_flash_forward from its qkv, out and stats: dqkv overwritten with
 * attention_backward's dQ, dK and dV, the probabilities recomputed tile by tile
 * (P = e^(S - m) / l) and rowsum(dP o P) taken as dO . out (from out as stored). dqkv may
 * alias none of the inputs. */
MP_OP(mp_status, attention_flash_backward, (const mp_attn_desc *d, const mp_tensor *qkv,
                                            const mp_tensor *out, const mp_tensor *stats,
                                            const mp_tensor *dout, mp_tensor *dqkv))

#undef MP_OP
