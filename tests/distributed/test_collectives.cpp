// The collective layer on real Gloo ranks, including the emulated all-gather/reduce-scatter.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "parallel/collectives.h"
#include "parallel/device_mesh.h"
#include "tests/support/distributed_test.h"

namespace megacpp {
namespace {

using parallel::ReduceOp;

// Rank r's input: values r * 100 + [0, n).
at::Tensor rank_values(int rank, int64_t n, at::ScalarType dtype = torch::kFloat) {
  return (torch::arange(n, torch::kFloat) + 100.0 * rank).to(dtype);
}

TEST(Collectives, AllGatherReduceScatterAllReduceBroadcastAllToAll) {
  testing::run_on_ranks(3, [](parallel::DistributedRuntime& rt) {
    const auto& g = rt.world();
    const int r = g.rank, n = 4, w = g.size();

    at::Tensor gathered = torch::empty({w * n});
    parallel::all_gather_into_tensor(g, gathered, rank_values(r, n)).wait();
    for (int j = 0; j < w; ++j) EXPECT_TRUE(gathered.narrow(0, j * n, n).equal(rank_values(j, n)));

    // input block j of rank r holds r*100 + j*10 + [0, n): the sum over ranks of block r.
    at::Tensor input = torch::empty({w * n});
    for (int j = 0; j < w; ++j) input.narrow(0, j * n, n).copy_(rank_values(r, n) + 10.0 * j);
    at::Tensor expected = torch::zeros({n});
    for (int s = 0; s < w; ++s) expected += rank_values(s, n) + 10.0 * r;
    at::Tensor out = torch::empty({n});
    parallel::reduce_scatter_tensor(g, out, input, ReduceOp::kSum).wait();
    EXPECT_TRUE(out.allclose(expected)) << out << expected;
    parallel::reduce_scatter_tensor(g, out, input, ReduceOp::kAvg).wait();
    EXPECT_TRUE(out.allclose(expected / w));

    at::Tensor value = rank_values(r, n);
    parallel::all_reduce(g, value, ReduceOp::kAvg).wait();
    EXPECT_TRUE(value.allclose(torch::arange(n, torch::kFloat) + 100.0));  // mean of 0, 100, 200

    at::Tensor b = rank_values(r, n);
    parallel::broadcast(g, b, 2).wait();
    EXPECT_TRUE(b.equal(rank_values(2, n)));

    // all_to_all: rank r's block j is r*100 + j; it lands in rank j's block r.
    at::Tensor send = torch::empty({w});
    for (int j = 0; j < w; ++j) send[j] = 100.0 * r + j;
    at::Tensor recv = torch::empty({w});
    parallel::all_to_all_single(g, recv, send).wait();
    for (int j = 0; j < w; ++j) EXPECT_EQ(recv[j].item<float>(), 100.0f * j + r);
  });
}

TEST(Collectives, SixteenBitFloatsOnGloo) {
  testing::run_on_ranks(2, [](parallel::DistributedRuntime& rt) {
    const auto& g = rt.world();
    at::Tensor gathered = torch::empty({2 * 3}, torch::kBFloat16);
    parallel::all_gather_into_tensor(g, gathered, rank_values(g.rank, 3, torch::kBFloat16)).wait();
    EXPECT_TRUE(gathered.narrow(0, 3, 3).equal(rank_values(1, 3, torch::kBFloat16)));

    at::Tensor input = torch::ones({2 * 3}, torch::kBFloat16) * (g.rank + 1);
    at::Tensor out = torch::empty({3}, torch::kBFloat16);
    parallel::reduce_scatter_tensor(g, out, input, ReduceOp::kSum).wait();
    EXPECT_TRUE(out.equal(torch::full({3}, 3.0, torch::kBFloat16)));

    at::Tensor value = torch::full({3}, 1.5 * (g.rank + 1), torch::kBFloat16);
    parallel::all_reduce(g, value, ReduceOp::kSum).wait();
    EXPECT_TRUE(value.equal(torch::full({3}, 4.5, torch::kBFloat16)));
  });
}

TEST(DeviceMesh, LayoutsAndErrors) {
  testing::run_on_ranks(4, [](parallel::DistributedRuntime& rt) {
    auto full = parallel::DeviceMesh::build(rt, -1);
    EXPECT_EQ(full.fsdp().size(), 4);
    EXPECT_FALSE(full.is_hsdp());

    auto hsdp = parallel::DeviceMesh::build(rt, 2);  // ddp=2 x fsdp=2, rank = d * 2 + f
    EXPECT_TRUE(hsdp.is_hsdp());
    const int d = rt.rank() / 2, f = rt.rank() % 2;
    EXPECT_EQ(hsdp.fsdp().global_ranks, (std::vector<int>{2 * d, 2 * d + 1}));
    EXPECT_EQ(hsdp.ddp().global_ranks, (std::vector<int>{f, f + 2}));
    EXPECT_EQ(hsdp.data_parallel_rank(), rt.rank());

    at::Tensor x = torch::full({1}, static_cast<float>(rt.rank()));
    parallel::all_reduce(hsdp.ddp(), x, ReduceOp::kSum).wait();
    EXPECT_EQ(x.item<float>(), static_cast<float>(2 * f + 2));

    try {
      parallel::DeviceMesh::build(rt, 3);
      ADD_FAILURE() << "sharding_size 3 on 4 ranks must be refused";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("sharding_size=3 does not divide the world size 4"), std::string::npos);
    }
  });
}

// Tensor parallelism innermost, as Megatron orders it: on 4 ranks with tp 2, TP {0, 1} {2, 3} and
// fsdp {0, 2} {1, 3}; with HSDP 2 x 1 x tp 2 the replicas are {0, 2} {1, 3}. All-reduces over
// each group sum what they should.
TEST(DeviceMesh, TensorParallelIsInnermostBesideFsdpAndHsdp) {
  testing::run_on_ranks(4, [](parallel::DistributedRuntime& rt) {
    parallel::ParallelDims dims;
    dims.world = 4;
    dims.tp = 2;
    dims.dp_shard = 2;
    const auto mesh = parallel::DeviceMesh::build(rt, dims);
    const int q = rt.rank() / 2, t = rt.rank() % 2;
    EXPECT_EQ(mesh.tp().global_ranks, (std::vector<int>{2 * q, 2 * q + 1}));
    EXPECT_EQ(mesh.fsdp().global_ranks, (std::vector<int>{t, t + 2}));
    EXPECT_EQ(mesh.ddp().size(), 1);
    EXPECT_EQ(mesh.data_parallel_size(), 2);
    EXPECT_EQ(mesh.data_parallel_rank(), q);
    EXPECT_EQ(mesh.describe(), "FSDP (fsdp=2), TP 2 (data-parallel 2)");
    at::Tensor x = torch::full({1}, static_cast<float>(rt.rank()));
    parallel::all_reduce(mesh.tp(), x, ReduceOp::kSum).wait();
    EXPECT_EQ(x.item<float>(), static_cast<float>(4 * q + 1));

    dims.dp_shard = 1;
    dims.dp_replicate = 2;
    const auto hsdp = parallel::DeviceMesh::build(rt, dims);
    EXPECT_EQ(hsdp.tp().global_ranks, (std::vector<int>{2 * q, 2 * q + 1}));
    EXPECT_EQ(hsdp.fsdp().size(), 1);
    EXPECT_EQ(hsdp.ddp().global_ranks, (std::vector<int>{t, t + 2}));
    EXPECT_EQ(hsdp.data_parallel_rank(), q);
    at::Tensor y = torch::full({1}, static_cast<float>(rt.rank()));
    parallel::all_reduce(hsdp.ddp(), y, ReduceOp::kSum).wait();
    EXPECT_EQ(y.item<float>(), static_cast<float>(2 * t + 2));
  });
}

}  // namespace
}  // namespace megacpp
