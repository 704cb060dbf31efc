// The fused attention loop nest in LLVM IR: one task per batch element (a head): pack K and V
// into microkernel panels once, then per block of query rows: the Q K tiles (the first matmul's
// microkernels and epilogue) into the score buffer, exp(x - max) and the sum of each score row
// in place, the P V tiles (the second matmul's microkernels) into O, and O's rows divided by
// their sums. When the keys do not fit one block of score rows, the softmax is online over
// blocks of keys: per block the running row maximum m and sum l are updated, O is rescaled by
// exp(m_old - m_new) and P V of the block added to it; O is divided by l at the end
// (FlashAttention's recurrence). In bf16 on AMX tiles the same nest packs each block of Q rows
// into 1 KiB tiles and K and V into panels of k padded to 32, reads P's bf16 rows in place
// (zeros after the keys up to a k step; key blocks of whole k steps), and loads the palette once
// per task.
#include "codegen/attention_kernel.h"

#include "codegen/microkernel_emitter.h"
#include "codegen/module_builder.h"
#include "codegen/post_op_emitter.h"
#include "codegen/tile_ops.h"
#include "codegen/weight_packing.h"

#include <limits>
#include <llvm/IR/IntrinsicsX86.h>
#include <numeric>

namespace tunec {

namespace {

// The k group of P V (kGroup): AMX reads P's rows and V's panels a tile row of 32 at a time.
int64_t pvGroup(const AttentionParts& p) {
  return kGroup(p.avConfig.isa, p.av.types);
}

// The granule of key counts: whole panels of the first matmul, and whole k groups of P V.
int64_t keyGrain(const AttentionParts& p) {
  return std::lcm<int64_t>(p.qkConfig.nr, pvGroup(p));
}

// Scores of one row padded to whole key granules.
int64_t scoreStride(const AttentionParts& p) {
  return roundUp(p.qk.n, keyGrain(p));
}

// Rows per block: a multiple of both mr.
int64_t rowGrain(const AttentionParts& p) {
  return std::lcm<int64_t>(p.qkConfig.mr, p.avConfig.mr);
}

using codegen::ModuleBuilder;

class AttentionEmitter : codegen::EmitterBase {
public:
  AttentionEmitter(ModuleBuilder& mb, const AttentionParts& p)
      : EmitterBase(mb), p_(p), ld_(attentionKeyBlock(p, mb.target())),
        rows_(attentionRowBlock(p, mb.target())), online_(ld_ < p.qk.n),
        bf16_(p.qk.types.wei == DType::BF16), amx_(p.qkConfig.isa == Isa::Amx) {}

  void emit(const std::string& entryName) {
    qk_ = makeKernels(p_.qk, p_.qkConfig, p_.qkEpilogue, p_.qk.transA && !bf16_, false, "att_qk");
    av_ = makeKernels(p_.av, p_.avConfig, {}, false, amx_, "att_av");
    llvm::Function* task = emitTask(entryName + "_task");
    auto args = mb_.beginKernelEntry(b_, entryName);
    mb_.emitRunTasks(b_, task,
                     {args[rt::kArgSrc], args[rt::kArgWei], args[rt::kArgValues], args[rt::kArgDst],
                      args[rt::kArgResidual]},
                     p_.qk.batch, p_.qk.threads);
    b_.CreateRetVoid();
  }

private:
  struct Kernels {
    llvm::Function* variants[4] = {};
  };

  // The full tile and the static M / N tail variants of one matmul's microkernel. On AMX, Q
  // comes in the 1 KiB tiles tunec_pack_a_bf16_tiles packs and P's rows are read in place
  // (`aInPlace`); the task loads the tile palette once.
  Kernels makeKernels(const MatmulWorkload& w, const MatmulConfig& c, const Epilogue& e,
                      bool aTransposed, bool aInPlace, const std::string& name) {
    int mTail = static_cast<int>(w.m % c.mr), nTail = static_cast<int>(w.n % c.nr);
    auto make = [&](int rows, int cols, const std::string& suffix) {
      MicrokernelSpec spec{c.isa, rows, c.nr, cols, aTransposed, true, e};
      spec.types = w.types;
      spec.tilesConfigured = amx_;
      spec.aRowsInPlace = aInPlace;
      if (convertsA(w.types)) spec.types.src = DType::BF16; // Q rounded per row block
      return codegen::emitMicrokernel(mb_, spec, name + "_" + suffix, true,
                                      rows == c.mr && cols == c.nr);
    };
    Kernels k;
    k.variants[0] = make(c.mr, c.nr, "full");
    k.variants[1] = nTail ? make(c.mr, nTail, "ntail") : k.variants[0];
    k.variants[2] = mTail ? make(mTail, c.nr, "mtail") : k.variants[0];
    k.variants[3] = mTail ? (nTail ? make(mTail, nTail, "mntail") : k.variants[2]) : k.variants[1];
    return k;
  }

  // K or V (f32 tensors) into the panels the microkernels read: f32, or bf16 k-pair panels (on
  // AMX each in its slot of k rounded up to 32, the rows past k zero).
  llvm::Value* packB(const MatmulWorkload& w, const MatmulConfig& c, llvm::Value* raw, int slot) {
    llvm::Value* packed = mb_.emitScratch(
        b_, slot, codegen::matmulPackedBElements(w, c) * static_cast<int64_t>(w.types.weiBytes()));
    codegen::emitPackComputedB(mb_, b_, w, c, true, raw, packed);
    return packed;
  }

  llvm::Function* emitTask(const std::string& name) {
    std::vector<llvm::Value*> fields;
    llvm::Function* fn = mb_.beginTask(b_, name, 5, fields);
    llvm::Value* head = fn->getArg(1);
    const MatmulWorkload &qk = p_.qk, &av = p_.av;
    llvm::Value* q = gep(fields[0], b_.CreateMul(head, i64(qk.aStride())));
    llvm::Value* k = gep(fields[1], b_.CreateMul(head, i64(qk.bStride())));
    llvm::Value* v = gep(fields[2], b_.CreateMul(head, i64(av.bStride())));
    llvm::Value* o = gep(fields[3], b_.CreateMul(head, i64(av.cStride())));
    llvm::Value* mask = gep(fields[4], b_.CreateMul(head, i64(qk.m * qk.n)));
    llvm::Value* kPanels = packB(qk, p_.qkConfig, k, 0);
    llvm::Value* vPanels = packB(av, p_.avConfig, v, 1);
    llvm::Value* scores = mb_.emitScratch(b_, 3, rows_ * ld_ * 4);
    // bf16: the block's Q rows rounded to bf16 (whole k-pairs; on AMX 1 KiB tiles of k rounded
    // up to 32) and P rounded to bf16, in one scratch (the score buffer keeps the f32 scores and
    // their exponentials).
    llvm::Value *qBf16 = nullptr, *pBf16 = nullptr;
    const int64_t qLd = roundUp(qk.k, kGroup(p_.qkConfig.isa, qk.types));
    if (bf16_) {
      qBf16 = mb_.emitScratch(b_, 2, (rows_ * qLd + rows_ * ld_) * 2);
      pBf16 = gep(DType::BF16, qBf16, i64(rows_ * qLd));
    }
    if (amx_) codegen::makeTileOps(mb_)->configure(b_, codegen::amxPalette());
    aArr_ = b_.CreateAlloca(mb_.ptr(), i64(1));
    bArr_ = b_.CreateAlloca(mb_.ptr(), i64(1));
    acc_ = b_.CreateAlloca(mb_.f32Vector()); // in the entry block: allocas in loops grow the stack
    rowSum_ = b_.CreateAlloca(mb_.f32(), i64(rows_));
    if (online_) rowMax_ = b_.CreateAlloca(mb_.f32(), i64(rows_));
    const int64_t full = qk.n / ld_, tail = qk.n % ld_;
    mb_.forLoop(b_, i64(0), i64(qk.m), rows_, "rowblk", [&](llvm::Value* ib) {
      llvm::Value* rows = min(i64(rows_), b_.CreateSub(i64(qk.m), ib));
      auto oRow = [&](llvm::Value* r) {
        return gep(o, b_.CreateMul(b_.CreateAdd(ib, r), i64(av.cLd())));
      };
      llvm::Value* first = qk.transA ? gep(q, ib) : gep(q, b_.CreateMul(ib, i64(qk.aLd())));
      if (amx_) { // Q's rows of this block as AMX tiles, rows and k padded with zeros
        llvm::FunctionCallee toTiles = codegen::declarePackABf16Tiles(mb_);
        b_.CreateCall(toTiles, {first, b_.getInt32(0), i64(qk.aLd()), b_.getInt32(qk.transA), rows,
                                i64(qk.k), i64(qLd), qBf16});
      } else if (bf16_) { // Q's rows of this block, rounded once for every key block
        llvm::FunctionCallee toBf16 = mb_.declare(
            "tunec_pack_a_f32_to_bf16",
            llvm::FunctionType::get(
                b_.getVoidTy(), {mb_.ptr(), mb_.i64(), mb_.i32(), mb_.i64(), mb_.i64(), mb_.ptr()},
                false));
        b_.CreateCall(toBf16,
                      {first, i64(qk.aLd()), b_.getInt32(qk.transA), rows, i64(qk.k), qBf16});
      }
      auto block = [&](llvm::Value* kb0, int64_t keys) {
        // S[rows x keys] = Q[ib.., :] K[:, kb0 .., with the first matmul's epilogue.
        emitTiles(qk, p_.qkConfig, qk_, rows, kPanels,
                  [&](llvm::Value* ir, llvm::Value* col) {
                    llvm::Value* row = b_.CreateAdd(ib, ir);
                    llvm::Value* a = bf16_ ? gep(DType::BF16, qBf16, b_.CreateMul(ir, i64(qLd)))
                                     : qk.transA ? gep(q, row)
                                                 : gep(q, b_.CreateMul(row, i64(qk.aLd())));
                    return Tile{a,
                                i64(bf16_ ? qLd : qk.aLd()),
                                gep(scores, b_.CreateAdd(b_.CreateMul(ir, i64(ld_)),
                                                         b_.CreateSub(col, kb0))),
                                i64(ld_),
                                gep(mask, b_.CreateAdd(b_.CreateMul(row, i64(qk.n)), col)),
                                i64(qk.n)};
                  },
                  {kb0, b_.CreateAdd(kb0, i64(keys)), amx_ ? i64(0) : nullptr,
                   amx_ ? i64(qLd) : nullptr, nullptr});
        mb_.forLoop(b_, i64(0), rows, 1, "softmax", [&](llvm::Value* r) {
          llvm::Value* row = gep(scores, b_.CreateMul(r, i64(ld_)));
          // bf16: P goes straight to its bf16 row (the f32 one is not read again).
          llvm::Value* pRow = bf16_ ? gep(DType::BF16, pBf16, b_.CreateMul(r, i64(ld_))) : nullptr;
          // AMX reads P's row a k group of 32 at a time: zeros after the keys' pairs, up to one.
          if (bf16_ && roundUp(keys, 2) < roundUp(keys, pvGroup(p_)))
            mb_.forLoop(
                b_, i64(roundUp(keys, 2)), i64(roundUp(keys, pvGroup(p_))), 1, "ppad",
                [&](llvm::Value* j) { b_.CreateStore(b_.getInt16(0), gep(DType::BF16, pRow, j)); });
          if (!online_) {
            // P unnormalized; O's row is divided by the sum instead (half as many columns).
            b_.CreateStore(emitExp(row, keys, emitRowMax(row, keys), pRow),
                           b_.CreateGEP(mb_.f32(), rowSum_, r));
            return;
          }
          llvm::Value* alpha = emitOnlineSoftmaxRow(row, keys, b_.CreateGEP(mb_.f32(), rowMax_, r),
                                                    b_.CreateGEP(mb_.f32(), rowSum_, r), pRow);
          // O's row so far, rescaled to the new maximum (garbage before the first block, which
          // overwrites it).
          emitScaleRow(oRow(r), av.n, alpha);
        });
        // O[ib.., :] (+)= P V[kb0 .., :].
        emitTiles(av, p_.avConfig, av_, rows, vPanels,
                  [&](llvm::Value* ir, llvm::Value* col) {
                    return Tile{bf16_ ? gep(DType::BF16, pBf16, b_.CreateMul(ir, i64(ld_)))
                                      : gep(scores, b_.CreateMul(ir, i64(ld_))),
                                i64(ld_),
                                gep(oRow(ir), col),
                                i64(av.cLd()),
                                nullptr,
                                i64(0)};
                  },
                  {nullptr, nullptr, kb0, i64(roundUp(keys, pvGroup(p_))),
                   b_.CreateSelect(b_.CreateICmpEQ(kb0, i64(0)), b_.getInt32(kUkrApplyEpilogue),
                                   b_.getInt32(kUkrApplyEpilogue | kUkrAccumulate))});
      };
      auto normalize = [&] {
        mb_.forLoop(b_, i64(0), rows, 1, "normalize", [&](llvm::Value* r) {
          llvm::Value* sum = b_.CreateLoad(mb_.f32(), b_.CreateGEP(mb_.f32(), rowSum_, r));
          emitScaleRow(oRow(r), av.n, b_.CreateFDiv(llvm::ConstantFP::get(mb_.f32(), 1.0), sum));
        });
      };
      if (!online_) {
        block(i64(0), qk.n);
        return normalize();
      }
      float inf = std::numeric_limits<float>::infinity();
      mb_.forLoop(b_, i64(0), rows, 1, "init", [&](llvm::Value* r) {
        b_.CreateStore(llvm::ConstantFP::get(mb_.f32(), -inf), b_.CreateGEP(mb_.f32(), rowMax_, r));
        b_.CreateStore(llvm::ConstantFP::get(mb_.f32(), 0.0), b_.CreateGEP(mb_.f32(), rowSum_, r));
      });
      mb_.forLoop(b_, i64(0), i64(full * ld_), ld_, "keyblk",
                  [&](llvm::Value* kb0) { block(kb0, ld_); });
      if (tail) block(i64(full * ld_), tail);
      normalize();
    });
    b_.CreateRetVoid();
    return fn;
  }

  struct Tile {
    llvm::Value *a, *lda, *c, *ldc, *addend, *ldAdd;
  };

  // One block of `n` scores of a row in place (or P to `bf16Out`, see emitExp): the new maximum
  // m' = max(m, max x) (NaN scores ignored by it, but kept NaN in P), P = exp(x - m') (m' = -inf
  // counts as 0, so that a block of masked-out keys gives zeros, not NaN), l = l * exp(m - m') +
  // sum P. Returns exp(m - m'), the factor for O's row so far.
  llvm::Value* emitOnlineSoftmaxRow(llvm::Value* row, int64_t n, llvm::Value* maxPtr,
                                    llvm::Value* sumPtr, llvm::Value* bf16Out) {
    llvm::Constant* minusInf =
        llvm::ConstantFP::get(mb_.f32(), -std::numeric_limits<float>::infinity());
    llvm::Constant* zero = llvm::ConstantFP::get(mb_.f32(), 0.0);
    llvm::Value* oldMax = b_.CreateLoad(mb_.f32(), maxPtr);
    llvm::Value* newMax = b_.CreateMaxNum(oldMax, emitRowMax(row, n));
    llvm::Value* base = b_.CreateSelect(b_.CreateFCmpOEQ(newMax, minusInf), zero, newMax);
    llvm::Value* total = emitExp(row, n, base, bf16Out);
    unsigned lanes = static_cast<unsigned>(mb_.f32Vector()->getNumElements());
    llvm::Value* alpha = b_.CreateExtractElement(
        codegen::emitExpNonPositive(b_, b_.CreateVectorSplat(lanes, b_.CreateFSub(oldMax, base))),
        uint64_t{0});
    // exp(-inf - base) is 0: nothing was added to O and l yet.
    alpha = b_.CreateSelect(b_.CreateFCmpOEQ(oldMax, minusInf), zero, alpha);
    b_.CreateStore(b_.CreateFAdd(b_.CreateFMul(b_.CreateLoad(mb_.f32(), sumPtr), alpha), total),
                   sumPtr);
    b_.CreateStore(newMax, maxPtr);
    return alpha;
  }

  // The maximum of the n scores at `row` (a scalar): whole vectors, then one masked vector for
  // n % lanes, then the lanes halved log2(lanes) times, each step one x86 max
  // (codegen::maxKeepingNan). A NaN score makes its row NaN through P whatever the maximum then
  // is, so the maximum need not order NaN.
  llvm::Value* emitRowMax(llvm::Value* row, int64_t n) {
    llvm::FixedVectorType* vecTy = mb_.f32Vector();
    int lanes = static_cast<int>(vecTy->getNumElements());
    int64_t full = n / lanes;
    int tail = static_cast<int>(n % lanes);
    llvm::Constant* minusInf =
        llvm::ConstantFP::get(vecTy, -std::numeric_limits<float>::infinity());
    // Accumulators through memory (forLoop bodies are separate blocks); mem2reg lifts them.
    b_.CreateStore(minusInf, acc_);
    mb_.forLoop(b_, i64(0), i64(full), 1, "max", [&](llvm::Value* i) {
      llvm::Value* x =
          b_.CreateAlignedLoad(vecTy, gep(row, b_.CreateMul(i, i64(lanes))), llvm::Align(4));
      b_.CreateStore(codegen::maxKeepingNan(b_, b_.CreateLoad(vecTy, acc_), x), acc_);
    });
    llvm::Value* mx = b_.CreateLoad(vecTy, acc_);
    if (tail)
      mx = codegen::maxKeepingNan(
          b_, mx,
          b_.CreateMaskedLoad(vecTy, gep(row, i64(full * lanes)), llvm::Align(4),
                              codegen::laneMask(b_, lanes, tail), minusInf));
    for (int half = lanes / 2; half >= 1; half /= 2) {
      std::vector<int> upper(static_cast<size_t>(lanes));
      for (int i = 0; i < lanes; ++i) upper[static_cast<size_t>(i)] = (i + half) % lanes;
      mx = codegen::maxKeepingNan(b_, mx, b_.CreateShuffleVector(mx, upper));
    }
    return b_.CreateExtractElement(mx, uint64_t{0});
  }

  // P = exp(x - base) of the n scores at `row` (a NaN score stays NaN), in place, or, with
  // `bf16Out`, rounded to bf16 there (P's k-pairs for P V, and a zero after an odd n: V's pair
  // panels are zero past the keys, and a NaN there would poison); returns the f32 sum of P.
  llvm::Value* emitExp(llvm::Value* row, int64_t n, llvm::Value* base, llvm::Value* bf16Out) {
    llvm::FixedVectorType* vecTy = mb_.f32Vector();
    int lanes = static_cast<int>(vecTy->getNumElements());
    int64_t full = n / lanes;
    int tail = static_cast<int>(n % lanes);
    llvm::Value* baseVec = b_.CreateVectorSplat(static_cast<unsigned>(lanes), base);
    auto expOf = [&](llvm::Value* x) {
      return codegen::emitExpNonPositive(b_, b_.CreateFSub(x, baseVec));
    };
    // P's vector at element `at` (masked when `mask`), f32 in place or bf16 to bf16Out.
    auto store = [&](llvm::Value* e, llvm::Value* at, llvm::Value* mask) {
      llvm::Value* p = bf16Out ? gep(DType::BF16, bf16Out, at) : gep(row, at);
      if (bf16Out) e = codegen::emitRoundToBf16(mb_, b_, e);
      llvm::Align align(bf16Out ? 2 : 4);
      if (mask)
        b_.CreateMaskedStore(e, p, align, mask);
      else
        b_.CreateAlignedStore(e, p, align);
    };
    llvm::Constant* zero = llvm::ConstantFP::get(vecTy, 0.0);
    b_.CreateStore(zero, acc_);
    mb_.forLoop(b_, i64(0), i64(full), 1, "exp", [&](llvm::Value* i) {
      llvm::Value* at = b_.CreateMul(i, i64(lanes));
      llvm::Value* e = expOf(b_.CreateAlignedLoad(vecTy, gep(row, at), llvm::Align(4)));
      store(e, at, nullptr);
      b_.CreateStore(b_.CreateFAdd(b_.CreateLoad(vecTy, acc_), e), acc_);
    });
    llvm::Value* sum = b_.CreateLoad(vecTy, acc_);
    if (tail) {
      llvm::Value* mask = codegen::laneMask(b_, lanes, tail);
      llvm::Value* x = b_.CreateMaskedLoad(
          vecTy, gep(row, i64(full * lanes)), llvm::Align(4), mask,
          llvm::ConstantFP::get(vecTy, -std::numeric_limits<float>::infinity()));
      llvm::Value* e = b_.CreateSelect(mask, expOf(x), zero);
      store(e, i64(full * lanes), mask);
      sum = b_.CreateFAdd(sum, e);
    }
    if (bf16Out && n % 2) b_.CreateStore(b_.getInt16(0), gep(DType::BF16, bf16Out, i64(n)));
    return b_.CreateFAddReduce(llvm::ConstantFP::get(mb_.f32(), 0.0), sum);
  }

  // row[0 .. n) *= factor (a scalar).
  void emitScaleRow(llvm::Value* row, int64_t n, llvm::Value* factor) {
    llvm::FixedVectorType* vecTy = mb_.f32Vector();
    int lanes = static_cast<int>(vecTy->getNumElements());
    int64_t full = n / lanes;
    int tail = static_cast<int>(n % lanes);
    llvm::Value* f = b_.CreateVectorSplat(static_cast<unsigned>(lanes), factor);
    mb_.forLoop(b_, i64(0), i64(full), 1, "scale", [&](llvm::Value* i) {
      llvm::Value* p = gep(row, b_.CreateMul(i, i64(lanes)));
      b_.CreateAlignedStore(b_.CreateFMul(b_.CreateAlignedLoad(vecTy, p, llvm::Align(4)), f), p,
                            llvm::Align(4));
    });
    if (tail) {
      llvm::Value* mask = codegen::laneMask(b_, lanes, tail);
      llvm::Value* p = gep(row, i64(full * lanes));
      llvm::Value* x =
          b_.CreateMaskedLoad(vecTy, p, llvm::Align(4), mask, llvm::ConstantFP::get(vecTy, 0.0));
      b_.CreateMaskedStore(b_.CreateFMul(x, f), p, llvm::Align(4), mask);
    }
  }

  // The part of B and C one call of emitTiles covers: columns [begin, end) of C, and rows
  // [kBegin, kBegin + k) of B (the whole k by default), accumulated into C or not.
  struct Range {
    llvm::Value *begin = nullptr, *end = nullptr, *kBegin = nullptr, *k = nullptr, *flags = nullptr;
  };

  // The tiles of rows x w.n of one matmul whose whole k is one block: per panel of B, per mr
  // rows, one microkernel call (the tail variants at the edges) with the epilogue applied.
  template <typename TileAt>
  void emitTiles(const MatmulWorkload& w, const MatmulConfig& c, const Kernels& kernels,
                 llvm::Value* rows, llvm::Value* panels, TileAt tileAt, Range range = {}) {
    if (!range.begin) range.begin = i64(0), range.end = i64(w.n);
    if (!range.k) range.kBegin = i64(0), range.k = i64(w.k);
    if (!range.flags) range.flags = b_.getInt32(kUkrApplyEpilogue);
    mb_.forLoop(b_, range.begin, range.end, c.nr, "jr", [&](llvm::Value* jr) {
      llvm::Value* panel = b_.CreateSDiv(jr, i64(c.nr));
      const int64_t panelElements = codegen::matmulPanelElements(w, c);
      llvm::Value* bPtr = gep(w.types.wei, panels,
                              b_.CreateAdd(b_.CreateMul(panel, i64(panelElements)),
                                           b_.CreateMul(range.kBegin, i64(c.nr))));
      b_.CreateStore(bPtr, bArr_);
      llvm::Value* nTail = b_.CreateICmpSLT(b_.CreateSub(i64(w.n), jr), i64(c.nr));
      mb_.forLoop(b_, i64(0), rows, c.mr, "ir", [&](llvm::Value* ir) {
        Tile t = tileAt(ir, jr);
        b_.CreateStore(t.a, aArr_);
        llvm::Value* mTail = b_.CreateICmpSLT(b_.CreateSub(rows, ir), i64(c.mr));
        codegen::MicrokernelArgs args;
        args.a = aArr_, args.b = bArr_, args.c = t.c, args.k = range.k, args.lda = t.lda;
        args.ldb = i64(c.nr), args.ldc = t.ldc, args.batch = i64(1), args.flags = range.flags;
        args.addend = t.addend, args.ldAdd = t.ldAdd, args.prefetchB = bPtr;
        mb_.emitVariantCall(b_, mb_.tileVariant(b_, mTail, nTail), kernels.variants,
                            args.list(mb_));
      });
    });
  }

  const AttentionParts& p_;
  int64_t ld_, rows_; ///< the score buffer's row stride (keys per block), rows per block
  bool online_;       ///< more keys than one block: the online softmax
  bool bf16_;         ///< vdpbf16ps: Q, K, P and V rounded to bf16, f32 scores and sums
  bool amx_;          ///< bf16 on AMX tiles: Q packed in tiles, P's rows read in place
  Kernels qk_, av_;
  llvm::Value *aArr_ = nullptr, *bArr_ = nullptr, *acc_ = nullptr;
  llvm::Value *rowMax_ = nullptr, *rowSum_ = nullptr; ///< per row of the block: m and l
};

} // namespace

Status checkAttention(const AttentionParts& p) {
  const MatmulWorkload &qk = p.qk, &av = p.av;
  TUNEC_TRY(qk.check());
  TUNEC_TRY(av.check());
  TUNEC_TRY(validateMatmulConfig(qk, p.qkConfig));
  TUNEC_TRY(validateMatmulConfig(av, p.avConfig));
  // f32, or bf16: Q (f32, rounded per row block) times K packed to bf16 pairs, then P (rounded
  // by the softmax) times V packed to bf16 pairs; f32 accumulation, scores and O.
  bool f32 = qk.types.allF32() && av.types.allF32();
  bool bf16 = convertsA(qk.types) && qk.types.dst == DType::F32 && isBf16Gemm(av.types) &&
              !convertsA(av.types) && av.types.dst == DType::F32;
  if (!f32 && !bf16)
    return makeError("attention: the matmuls must be f32, or f32 Q x bf16 K then bf16 P x bf16 V "
                     "with f32 results");
  if (qk.constantB || av.constantB) return makeError("attention: K and V must be computed");
  if (qk.batch != av.batch || qk.m != av.m || qk.n != av.k)
    return makeError("attention: Q K is ", qk.batch, "x", qk.m, "x", qk.n, " but P V reads ",
                     av.batch, "x", av.m, "x", av.k);
  if (qk.broadcastB || av.broadcastB || qk.batch < 1)
    return makeError("attention: K and V must have one matrix per batch element");
  if (p.qkConfig.isa != p.avConfig.isa)
    return makeError("attention: the two matmuls' configs name different ISAs");
  if (epilogueNeedsBias(p.qkEpilogue))
    return makeError("attention: the scores' epilogue cannot add a bias vector");
  if (p.keyBlock < 0) return makeError("attention: key_block must be 0 (automatic) or positive");
  return {};
}

int64_t attentionKeyBlock(const AttentionParts& p, const Target& target) {
  int64_t nr = keyGrain(p), all = scoreStride(p);
  if (p.keyBlock > 0) return std::min(all, roundUp(p.keyBlock, nr));
  if (rowGrain(p) * all * 4 <= target.l2 / 2) return all;
  return std::max<int64_t>(nr, target.l1d / 2 / (rowGrain(p) * 4) / nr * nr);
}

int64_t attentionRowBlock(const AttentionParts& p, const Target& target) {
  int64_t l = rowGrain(p);
  int64_t fit = std::max<int64_t>(1, target.l1d / 2 / (attentionKeyBlock(p, target) * 4) / l) * l;
  int64_t all = (p.qk.m + l - 1) / l * l;
  return std::min(fit, all);
}

namespace codegen {

Status emitAttentionKernel(ModuleBuilder& mb, const std::string& symbol, const AttentionParts& p) {
  TUNEC_TRY(checkAttention(p));
  TUNEC_TRY(checkTargetSupports(mb.target(), p.qkConfig.isa, p.qk.types));
  AttentionEmitter(mb, p).emit(symbol);
  return {};
}

} // namespace codegen

Expected<AttentionKernel> compileAttention(Jit& jit, const AttentionParts& parts) {
  auto module = jit.newModule(parts.qkConfig.isa, "tunec_attention");
  std::string name = module->module().getModuleIdentifier();
  TUNEC_TRY(codegen::emitAttentionKernel(*module, name, parts));
  AttentionKernel kernel;
  TUNEC_ASSIGN_OR_RETURN(void* address, jit.addAndLookup(std::move(module), name));
  kernel.fn_ = reinterpret_cast<rt::KernelFn>(address);
  return kernel;
}

} // namespace tunec
