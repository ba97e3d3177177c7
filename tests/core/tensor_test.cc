#include "core/tensor.h"

#include <gtest/gtest.h>

#include "autograd/functions.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/views.h"

namespace trident {
namespace {

TEST(Tensor, FactoriesAreContiguousAndFilled) {
  Tensor t = full({2, 3}, 1.5);
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.strides(), (Strides{3, 1}));
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(to_vector<double>(t), std::vector<double>(6, 1.5));
  EXPECT_EQ(scalar_tensor(4.0).item(), 4.0);
  EXPECT_EQ(to_vector<int64_t>(arange(4)), (std::vector<int64_t>{0, 1, 2, 3}));
}

TEST(Tensor, ViewOutsideStorageIsRejected) {
  Tensor t = zeros({4});
  EXPECT_THROW(make_view(t, Shape{5}, Strides{1}, 0), Error);
  EXPECT_THROW(make_view(t, Shape{2}, Strides{1}, 3), Error);
  EXPECT_THROW(make_view(t, Shape{2}, Strides{-1}, 3), Error);
  EXPECT_NO_THROW(make_view(t, Shape{2}, Strides{2}, 1));
  try {
    make_view(t, Shape{3}, Strides{2}, 0);
    FAIL();
  } catch (const Error& e) {
    // The message names the shape, strides and the storage size.
    EXPECT_NE(std::string(e.what()).find("(3,)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("holds only 4"), std::string::npos) << e.what();
  }
}

TEST(Tensor, DataPtrChecksDtype) {
  Tensor t = zeros({2}, DType::kBF16);
  EXPECT_NO_THROW(t.data_ptr<bf16>());
  EXPECT_THROW(t.data_ptr<float>(), Error);
}

TEST(Tensor, RequiresGradOnlyForFloatingLeaves) {
  Tensor i = zeros({2}, DType::kI64);
  EXPECT_THROW(i.set_requires_grad(true), Error);
  Tensor f = zeros({2});
  f.set_requires_grad(true);
  EXPECT_TRUE(f.requires_grad());
  EXPECT_TRUE(f.is_leaf());
  EXPECT_FALSE(detach(f).requires_grad());
  EXPECT_TRUE(detach(f).shares_storage_with(f));
}

TEST(Views, ShareStorageAndMapElements) {
  Tensor t = from_vector<float>({0, 1, 2, 3, 4, 5}, {2, 3});
  Tensor tt = views::transpose(t, 0, 1);
  EXPECT_TRUE(tt.shares_storage_with(t));
  EXPECT_FALSE(tt.is_contiguous());
  EXPECT_EQ(to_vector<float>(tt), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(to_vector<float>(views::narrow(t, 1, 1, 2)), (std::vector<float>{1, 2, 4, 5}));
  EXPECT_EQ(to_vector<float>(views::select(t, 0, 1)), (std::vector<float>{3, 4, 5}));
  EXPECT_EQ(to_vector<float>(views::expand(views::narrow(t, 0, 0, 1), {3, 3})),
            (std::vector<float>{0, 1, 2, 0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(views::unsqueeze(t, 1).shape(), (Shape{2, 1, 3}));
  EXPECT_EQ(views::squeeze(views::unsqueeze(t, 0), 0).shape(), (Shape{2, 3}));
  EXPECT_EQ(to_vector<float>(views::permute(views::view(t, {1, 2, 3}), {2, 0, 1})),
            (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

TEST(Views, ViewNeedsCompatibleStrides) {
  Tensor t = zeros({4, 6});
  EXPECT_EQ(views::view(t, {2, -1, 3}).shape(), (Shape{2, 4, 3}));
  Tensor tt = views::transpose(t, 0, 1);  // (6, 4), strides (1, 6)
  EXPECT_THROW(views::view(tt, {24}), Error);
  EXPECT_NO_THROW(views::view(tt, {6, 2, 2}));  // splitting one dim is always a view
  EXPECT_THROW(views::view(t, {5, 5}), Error);
  EXPECT_THROW(views::view(t, {-1, -1}), Error);
  // A narrowed slice keeps its row stride: rows can be merged only where contiguous.
  Tensor n = views::narrow(t, 1, 0, 3);  // (4, 3), strides (6, 1)
  EXPECT_THROW(views::view(n, {12}), Error);
  EXPECT_EQ(views::view(n, {2, 2, 3}).strides(), (Strides{12, 6, 1}));
}

TEST(Views, ErrorsNameTheArguments) {
  Tensor t = zeros({2, 3});
  EXPECT_THROW(views::transpose(t, 0, 2), Error);
  EXPECT_THROW(views::narrow(t, 1, 2, 2), Error);
  EXPECT_THROW(views::expand(t, {2, 4}), Error);
  EXPECT_THROW(views::permute(t, {0, 0}), Error);
  try {
    views::narrow(t, 1, 2, 2);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIndex);
    EXPECT_NE(std::string(e.what()).find("[2, 4)"), std::string::npos) << e.what();
  }
}

TEST(Copy, CastsAndCopiesStrided) {
  Tensor t = from_vector<float>({0.5f, -1.25f, 3.0f, 4.0f}, {2, 2});
  Tensor b = core::cast(t, DType::kBF16);
  EXPECT_EQ(b.dtype(), DType::kBF16);
  EXPECT_EQ(to_vector<float>(b), to_vector<float>(t));
  Tensor c = core::contiguous(views::transpose(t, 0, 1));
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(to_vector<float>(c), (std::vector<float>{0.5f, 3.0f, -1.25f, 4.0f}));
  EXPECT_TRUE(core::contiguous(t).is_same(t));
  const uint64_t v = t.version();
  core::copy_(t, zeros({2}));  // broadcast source
  EXPECT_GT(t.version(), v);
  EXPECT_EQ(to_vector<float>(t), std::vector<float>(4, 0.0f));
  EXPECT_THROW(core::copy_(views::expand(zeros({1}), {3}), zeros({3})), Error);
}

}  // namespace
}  // namespace trident

namespace trident {
namespace {

TEST(Copy, PinMemoryCopiesIntoAContiguousHostTensor) {
  const Tensor t = views::transpose(from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, Shape{2, 3}), 0, 1);
  const Tensor pinned = core::pin_memory(t);
  EXPECT_TRUE(pinned.device().is_cpu());
  EXPECT_TRUE(pinned.is_contiguous());
  EXPECT_FALSE(pinned.storage() == t.storage());
  EXPECT_EQ(to_vector<float>(pinned), to_vector<float>(t));
  const Tensor e = empty_pinned({0, 4}, DType::kBF16);  // empty shapes are fine
  EXPECT_EQ(e.numel(), 0);
}

TEST(Tensor, SetDataRepointsEveryHolderAndDropsAMismatchedGrad) {
  Tensor p = from_vector(std::vector<float>{1, 2, 3}, {3});
  p.set_requires_grad(true);
  p.mutable_grad() = from_vector(std::vector<float>{1, 1, 1}, {3});
  const Tensor holder = p;  // e.g. a module's member and its parameter list
  p.set_data(core::cast(from_vector(std::vector<float>{4, 5, 6}, {3}), DType::kBF16));
  EXPECT_EQ(holder.dtype(), DType::kBF16);
  EXPECT_TRUE(holder.requires_grad());
  EXPECT_FALSE(holder.grad().has_value());
  EXPECT_EQ(to_vector<float>(core::cast(holder, DType::kF32)), (std::vector<float>{4, 5, 6}));
}

TEST(Tensor, SetDataRefusesANonLeaf) {
  Tensor p = from_vector(std::vector<float>{1, 2}, {2});
  p.set_requires_grad(true);
  Tensor y = p * 2.0;
  EXPECT_THROW(y.set_data(p), Error);
}

}  // namespace
}  // namespace trident
