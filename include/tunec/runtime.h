/* The C API of a compiled tunec model (model.so, made by `tunec compile`).
 *
 *   tunec_model* model;
 *   if (tunec_model_load("model.so", 2, &model) != 0) { puts(tunec_last_error()); ... }
 *   const void* in[] = {x};  void* out[] = {y};
 *   tunec_model_run(model, in, out);
 *   tunec_model_free(model);
 *
 * Link with -ltunec_runtime. A loaded model may be run from several threads at once: each run
 * takes its own arena. Tensors are dense, row-major, in the dtype and shape the info reports.
 *
 * A model compiled with symbolic dimensions (`tunec compile --dim sequence=1..512`) runs at any
 * input shape within their bounds: tunec_model_run_shaped takes the run's input shapes and
 * writes its output shapes; the info's dims are then the bounds (buffers of that size always
 * suffice) and tunec_model_dim_name names the symbolic ones.
 */
#ifndef TUNEC_RUNTIME_H
#define TUNEC_RUNTIME_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tunec_model tunec_model;

typedef struct tunec_tensor_info {
  const char* name;
  const char* dtype; /* "f32", "i64", "i32", ... */
  int32_t rank;
  const int64_t* dims;
  int64_t bytes;
} tunec_tensor_info;

/* Loads a compiled model; `threads` (>= 1) is the most threads one run uses. Returns 0, or
 * non-zero with the reason in tunec_last_error(). */
int tunec_model_load(const char* path, int32_t threads, tunec_model** model);
/* The message of the last failed call on this thread. */
const char* tunec_last_error(void);
int32_t tunec_model_num_inputs(const tunec_model* model);
int32_t tunec_model_num_outputs(const tunec_model* model);
/* Fills `info` (valid while the model is loaded); non-zero if the index is out of range. */
int tunec_model_input_info(const tunec_model* model, int32_t index, tunec_tensor_info* info);
int tunec_model_output_info(const tunec_model* model, int32_t index, tunec_tensor_info* info);
/* Runs the model: inputs[i] and outputs[i] point to dense buffers of the reported sizes. */
int tunec_model_run(tunec_model* model, const void* const* inputs, void* const* outputs);
void tunec_model_free(tunec_model* model);

/* The symbols of the inputs' dynamic dimensions (0 for a static model), each with its bounds. */
int32_t tunec_model_num_symbols(const tunec_model* model);
int tunec_model_symbol_info(const tunec_model* model, int32_t index, const char** name,
                            int64_t* min, int64_t* max);
/* Dimension `dim` of input (is_output 0) or output (1) `index`: "" when static, else its
 * extent over the symbols ("sequence", "batch*sequence"). NULL if out of range. */
const char* tunec_model_dim_name(const tunec_model* model, int32_t is_output, int32_t index,
                                 int32_t dim);
/* Runs at the given input shapes (input_dims[i]: input i's dims, as many as its rank), dense
 * buffers of those shapes; writes output o's dims into output_dims[o] (room for its rank; NULL
 * to skip). A shape outside the bounds, two inputs that disagree on one symbol, or a static
 * dimension of another size is an error before anything runs. A static model takes its
 * shapes. */
int tunec_model_run_shaped(tunec_model* model, const void* const* inputs,
                           const int64_t* const* input_dims, void* const* outputs,
                           int64_t* const* output_dims);

/* K/V caches kept in place. A decoder compiled with symbolic past lengths whose presents are
 * Concat(past, the run's rows) keeps each past/present pair in one layout, the present's bound
 * (`capacity` positions along `axis`, `bytes` in all): tunec_model_run_cached takes those inputs
 * and outputs as buffers in that layout, and where a past and its present are one buffer a run
 * writes only its new rows (nothing of the past is copied). tunec_model_run and
 * tunec_model_run_shaped take them dense, as any tensor, and copy. */
typedef struct tunec_cache_info {
  int32_t input;  /* the past's input index */
  int32_t output; /* the present's output index */
  int32_t axis;   /* the dimension the cache grows along */
  int64_t capacity;
  int64_t bytes;
} tunec_cache_info;
int32_t tunec_model_num_caches(const tunec_model* model);
int tunec_model_cache_info(const tunec_model* model, int32_t index, tunec_cache_info* info);
/* tunec_model_run_shaped with the caches' pasts and presents in their layout; the dims are the
 * run's (a past of its length along the axis). */
int tunec_model_run_cached(tunec_model* model, const void* const* inputs,
                           const int64_t* const* input_dims, void* const* outputs,
                           int64_t* const* output_dims);

/* Generation with a decoder (input_ids, attention_mask and position_ids when it has them,
 * past_key_values.N.key/value -> logits, present.N.key/value), the caller choosing each token:
 *
 *   tunec_generator* g;  const float* logits;
 *   tunec_generator_create(model, &g);
 *   tunec_generator_append(g, prompt, prompt_len, &logits);     prefill
 *   for (...) { next = choose(logits, tunec_generator_vocab(g));
 *               tunec_generator_append(g, &next, 1, &logits); } one token
 *   tunec_generator_free(g);
 *
 * A prompt longer than the model's sequence bound runs in several runs. The buffers are allocated
 * once; with caches kept in place nothing of the past is copied per token. `logits` (the last
 * token's, vocab floats) is valid until the next call. One generator is one sequence, used from
 * one thread at a time; several may share a model. */
typedef struct tunec_generator tunec_generator;
int tunec_generator_create(tunec_model* model, tunec_generator** generator);
int tunec_generator_append(tunec_generator* generator, const int64_t* ids, int64_t count,
                           const float** logits);
int64_t tunec_generator_length(const tunec_generator* generator);   /* tokens in the context */
int64_t tunec_generator_capacity(const tunec_generator* generator); /* the most it holds */
int64_t tunec_generator_vocab(const tunec_generator* generator);
int32_t tunec_generator_in_place(const tunec_generator* generator); /* caches kept in place */
void tunec_generator_reset(tunec_generator* generator);             /* empty the context */
void tunec_generator_free(tunec_generator* generator);

/* Profiling: the model's steps (kernels and loop kernels, in run order), their labels, and a run
 * that adds each step's wall time in seconds to step_seconds[i]. */
int32_t tunec_model_num_steps(const tunec_model* model);
const char* tunec_model_step_label(const tunec_model* model, int32_t step);
/* tunec_model_run_shaped, adding each step's wall time to step_seconds[i] (a symbolic model). */
int tunec_model_run_shaped_profiled(tunec_model* model, const void* const* inputs,
                                    const int64_t* const* input_dims, void* const* outputs,
                                    int64_t* const* output_dims, double* step_seconds);
int tunec_model_run_profiled(tunec_model* model, const void* const* inputs, void* const* outputs,
                             double* step_seconds);
/* A step's cost, for rooflines (`tunec profile`): the arithmetic operations and the bytes of its
 * distinct operands in one run (both 0 in a model compiled before tunec recorded them), and
 * whether it is a generated kernel (1) or a loop kernel (0). Non-zero if the index is out of
 * range. */
int tunec_model_step_cost(const tunec_model* model, int32_t step, double* flops, int64_t* bytes,
                          int32_t* generated);
/* A step's kind (the plan's StepKind: 0 a generated kernel, 12 a weight-only matmul, ...), -1
 * if out of range. */
int32_t tunec_model_step_kind(const tunec_model* model, int32_t step);
/* A symbolic model's step costs in a run of these input shapes, one entry per step in each
 * array (tunec_model_num_steps): the matmuls of run-time extents (weight-only and batched) at
 * the run's, a size bucket's generated kernel's operations at the run's M (its bytes at the
 * bucket's largest), other steps of run-time extents 0 (unknown). */
int tunec_model_step_costs_at(const tunec_model* model, const int64_t* const* input_dims,
                              double* flops, int64_t* bytes, double* bf16_flops, double* int8_ops);
/* Of a step's operations (tunec_model_step_cost), those of bf16 kernels (--precision bf16),
 * whose roof is the bf16 dot-product peak; 0 in an fp32 model. Non-zero if out of range. */
int tunec_model_step_bf16_flops(const tunec_model* model, int32_t step, double* flops);
/* Of a step's operations, those of int8 kernels (u8 x s8), whose roof is the int8 dot-product
 * peak; 0 in a model without them. Non-zero if out of range. */
int tunec_model_step_int8_ops(const tunec_model* model, int32_t step, double* ops);
/* The CPU features the model's code requires, in tunec's names ("avx2, fma, avx512f, avx512bw,
 * avx512vl, avx512dq, avx512_vnni"): its vector ISA's and its kernels' dot products'. */
const char* tunec_model_isa(const tunec_model* model);

#ifdef __cplusplus
}
#endif

#endif
