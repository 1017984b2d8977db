"""Communication kernels beyond NCCL: the kit's one rule
(:func:`tracegraph.ingest.formats.kit.is_communication_kernel`), as the
Kineto and XPlane parsers apply it, and what the analyses that split
communication from computation answer with it.

Every kernel name here is a real one, copied from where it was published:

- DeepSeek's own DeepEP (``dpsk::ep::``) and the compute kernels around it:
  deepseek-ai/profile-data, ``train.json`` at commit
  449602428a1b023acb8a505d4f34fef536535db6 (a DeepSeek-V3 training step:
  its 36 ``dpsk::ep::`` kernels are 113,440 of its 244,069 us of kernel
  time, all on stream 27; ``dpsk::grouped_gemm::`` is compute on stream 7).
  ``dispatch_ll`` / ``combine_ll``: that repository's ``decode.json``, as
  quoted in deepseek-ai/profile-data issue #19.
- Open-source DeepEP (``deep_ep::``): deepseek-ai/DeepEP issue #575
  (``deep_ep::intranode::cached_notify_combine<8>``,
  ``deep_ep::intranode::combine``, ``deep_ep::intranode::dispatch``) and
  issue #348 (``internode_ll::dispatch`` / ``internode_ll::combine``).
- NCCL and MSCCL++ from one Nsight Systems table: apache/tvm pull request
  #16842 (``ncclDevKernel_AllReduce_Sum_f16_RING_LL(...)``, MSCCL++'s
  ``tvm::runtime::allreduce_simple<__half>(mscclpp::SmChannelDeviceHandle *, ...``
  as nsys cut it, TensorRT-LLM's ``oneShotAllReduceKernel`` /
  ``twoShotAllReduceKernel``).
- NVSHMEM: bytedance/flux issue #158 (``nvshmemi_proxy_rma_entrypoint_blocking``).
- RCCL: ROCm's kernel names as rocprof and Kineto print them,
  ``ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)`` and MSCCL's
  ``mscclKernel_Sum_hip_bfloat16_Simple_false(ncclDevComm*, mscclAlgo*,
  mscclWork*)`` (MSCCL's naming: ``MSCCL_KERNEL_ENTRY_NAME`` in ROCm/rccl
  ``src/include/msccl/msccl_kernel.h``); ``rcclGenericKernel``: ROCm/rccl
  ``src/device/generate.py``; vLLM/aiter's ``cross_device_reduce_2stage``
  custom all-reduce on ROCm.

The answers are worked out by hand from the intervals each test lays out.
"""

from __future__ import annotations

import pytest
from test_format_xplane import Plane, space

from tests import kineto_builder
from tracegraph.ingest.formats.kit import is_communication_kernel
from tracegraph.ingest.formats.xplane import trace as xplane
from tracegraph.ingest.pipeline import ingest
from tracegraph.queries.run import run_analysis

# deepseek-ai/profile-data train.json (see above).
DPSK_NOTIFY = (
    "void dpsk::ep::internode::notify_dispatch<false, 8>(int const*, long*, int, int const*, int*, int const*, int*, "
    "int, bool const*, int, int, int, int, int, int, int, int*, int*, int*, int*, void*, void**, int**, int, int, "
    "int*, int)"
)
DPSK_DISPATCH = (
    "void dpsk::ep::internode::dispatch<false, 8, true, 8>(int4*, float*, long*, float*, "
    "dpsk::ep::internode::SourceMeta*, int4 const*, float const*, long const*, float const*, int*, int*, int*, int*, "
    "int const*, int const*, int const*, int const*, int, int, int, int, int, bool const*, void*, int, int, void**, "
    "int, int, int, int, int*)"
)
DPSK_COMBINE = (
    "void dpsk::ep::internode::combine<false, 8, __nv_bfloat16, 8, 2, 16, 24>(int4*, float*, bool const*, "
    "int4 const*, float const*, int4 const*, int4 const*, int const*, int const*, "
    "dpsk::ep::internode::SourceMeta const*, int const*, int const*, int const*, int, int, int, int, void*, int, int, "
    "void**, int, int, int, int, int*)"
)
DPSK_CACHED_NOTIFY = (
    "void dpsk::ep::internode::cached_notify<false>(int, int, int, int, int*, int, int, int const*, int const*, int*, "
    "void*, void**, int**, int, int, int, int*, bool, int)"
)
DPSK_LAYOUT = (
    "void dpsk::ep::cuda::get_dispatch_layout<256, 32, 8>(long const*, int*, int*, int*, bool*, int, int, int, int)"
)
DPSK_GEMM = (
    "void cutlass::device_kernel<dpsk::grouped_gemm::cuda::fp8_ptp128c::GemmKernel>"
    "(dpsk::grouped_gemm::cuda::fp8_ptp128c::GemmKernel::Params)"
)
DPSK_TENSORMAPS = (
    "dpsk::grouped_gemm::cuda::utils::fill_tensormaps_kernel(CUtensorMap_st, CUtensorMap_st*, void*, int, long)"
)
# bytedance/flux issue #158.
NVSHMEM_RMA = "nvshmemi_proxy_rma_entrypoint_blocking"
# apache/tvm pull request #16842 (nsys cut the name there).
MSCCLPP_ALLREDUCE = "void tvm::runtime::allreduce_simple<__half>(mscclpp::SmChannelDeviceHandle *, const T1 *"
# ROCm (see the module docstring).
RCCL_GENERIC = "ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)"
MSCCL_SUM = "mscclKernel_Sum_hip_bfloat16_Simple_false(ncclDevComm*, mscclAlgo*, mscclWork*)"

COMMUNICATION = [
    DPSK_NOTIFY,
    DPSK_DISPATCH,
    DPSK_COMBINE,
    DPSK_CACHED_NOTIFY,
    DPSK_LAYOUT,
    "void dpsk::ep::internode::dispatch_ll",
    "void dpsk::ep::internode::combine_ll",
    "deep_ep::intranode::cached_notify_combine<8>",
    "deep_ep::intranode::combine",
    "deep_ep::intranode::dispatch",
    "deep_ep::internode_ll::dispatch",
    "deep_ep::internode_ll::combine",
    "ncclDevKernel_AllReduce_Sum_f16_RING_LL(ncclDevComm *, unsigned long, ncclWork *)",
    "ncclKernel_AllReduce_RING_LL_Sum_float",
    MSCCLPP_ALLREDUCE,
    NVSHMEM_RMA,
    RCCL_GENERIC,
    MSCCL_SUM,
    "void rcclGenericKernel<2, false>(ncclDevKernelArgs4K)",
    "void aiter::cross_device_reduce_2stage<bf16,8,false>",
    "void tensorrt_llm::twoShotAllReduceKernel<__half, (int)8>(tensorrt_llm::AllReduceParams)",
    "void tensorrt_llm::oneShotAllReduceKernel<__half, (int)8>(tensorrt_llm::AllReduceParams)",
]
COMPUTE = [
    DPSK_GEMM,
    DPSK_TENSORMAPS,
    "rotary_kernel",
    "void cuda::per_token_cast_to_fp8_with_channels<__nv_bfloat16, 128, false, 128, false>",
    "sm90_xmma_gemm_bf16f32_bf16f32_f32_nt_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
    # DeepSeek's CUB scan in the prefill trace's sampling: a namespace that ends in dpsk::ep:: but is not DeepEP.
    "void cdpsk::ep::CUB_namespace::DeviceScanKernel",
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >",
    "Memcpy DtoH (Device -> Pageable)",
]


@pytest.mark.parametrize("name", COMMUNICATION)
def test_communication_kernels_are_recognised(name):
    assert is_communication_kernel(name)


@pytest.mark.parametrize("name", COMPUTE)
def test_compute_kernels_are_not(name):
    assert not is_communication_kernel(name)


def _kernel_trace(kernels: list[tuple[str, int, float, float, dict]], rank: int | None = None) -> dict:
    """A Kineto document: one host thread launching each kernel (name,
    stream, start, duration, args) from an op of its own, 1 us before it."""
    x = kineto_builder._x
    events = []
    for i, (name, stream, start, dur, args) in enumerate(kernels):
        events.append(x("cpu_op", f"launcher{i}", start - 1, 0.5))
        events.append(x("cuda_runtime", "cudaLaunchKernel", start - 1, 0.25, correlation=i + 1))
        events.append(
            x("kernel", name, start, dur, pid=0, tid=stream, device=0, stream=stream, correlation=i + 1, **args)
        )
    doc = kineto_builder.document(rank=rank)
    doc["traceEvents"] = events
    return doc


# A DeepEP step laid out by hand (us): compute on stream 7, DeepEP on stream 27,
# NVSHMEM and MSCCL++ on stream 29.
DEEPEP_STEP = [
    (DPSK_GEMM, 7, 0, 100, {}),
    (DPSK_LAYOUT, 27, 5, 3, {}),
    (DPSK_NOTIFY, 27, 10, 20, {}),
    (DPSK_DISPATCH, 27, 30, 50, {}),
    (DPSK_COMBINE, 27, 120, 50, {}),
    (DPSK_GEMM, 7, 150, 50, {}),
    (DPSK_CACHED_NOTIFY, 27, 170, 10, {}),
    (NVSHMEM_RMA, 29, 200, 10, {}),
    (MSCCLPP_ALLREDUCE, 29, 210, 20, {}),
    (DPSK_TENSORMAPS, 7, 215, 5, {}),
]


def test_deepep_nvshmem_and_mscclpp_are_communication_in_the_overlap(graph, tmp_path):
    """Communication [5, 8) + [10, 80) + [120, 180) + [200, 230) = 163;
    computation [0, 100) + [150, 200) + [215, 220) = 155; both at once
    [5, 8) + [10, 80) + [150, 180) + [215, 220) = 108; exposed 163 - 108 = 55.
    (With NCCL alone as communication this trace had none: `not available`.)"""
    path = kineto_builder.write(tmp_path / "deepep.json.gz", _kernel_trace(DEEPEP_STEP))
    ingest(graph, [path], "deepep")
    res = run_analysis(graph, "comm-compute-overlap", "deepep")
    assert res.available, res.note
    assert [tuple(r) for r in res.rows] == [
        (
            0,
            "gpu",
            pytest.approx(163.0),
            pytest.approx(155.0),
            pytest.approx(108.0),
            pytest.approx(55.0),
            pytest.approx(55 / 163),
        )
    ]
    # The ops that launched them are communication (each with its runtime call inside it), the others forward.
    phases = {r["phase"]: r for r in run_analysis(graph, "phase-breakdown", "deepep").records()}
    assert (phases["communication"]["ops"], phases["forward"]["ops"]) == (2 * 7, 2 * 3)


def test_observed_path_labels_them_communication(graph, tmp_path):
    """A GEMM [0, 10) on stream 7, then DeepEP's combine [20, 120) and an
    NVSHMEM put [130, 140) on stream 27, a short rotary kernel [125, 126)
    on stream 7: the heaviest path runs through the two communication
    kernels, labelled so (110 us of communication on the path)."""
    step = [
        (DPSK_GEMM, 7, 0, 10, {}),
        (DPSK_COMBINE, 27, 20, 100, {}),
        ("rotary_kernel", 7, 125, 1, {}),
        (NVSHMEM_RMA, 27, 130, 10, {}),
    ]
    path = kineto_builder.write(tmp_path / "deepep.json.gz", _kernel_trace(step))
    ingest(graph, [path], "deepep-path")
    res = run_analysis(graph, "observed-critical-path", "deepep-path")
    kernels = [
        (r["event"], r["kind"], r["dur_us"], r["counted"]) for r in res.records() if r["resource"].endswith("27")
    ]
    assert kernels == [
        (DPSK_COMBINE, "communication", pytest.approx(100.0), True),
        (NVSHMEM_RMA, "idle", pytest.approx(10.0), False),  # the put was launched after the combine ended
        (NVSHMEM_RMA, "communication", pytest.approx(10.0), True),
    ]
    summary = {r["category"]: r for r in run_analysis(graph, "observed-critical-path-summary", "deepep-path").records()}
    assert summary["communication"]["counted_us"] == pytest.approx(110.0)


def test_rccl_job_joins_and_splits_idle_time(graph, tmp_path):
    """Two ranks of a ROCm job whose all-reduces run as RCCL's MSCCL kernel
    and its generic NCCL kernel, with the collective metadata PyTorch
    records (us): rank 0 computes [0, 50) on stream 7, all-reduces on
    stream 9 [50, 100) and [150, 160); rank 1 computes [0, 80), all-reduces
    [80, 100) and [140, 160). The first all-reduce's last arrival is rank
    1's at 80 (rank 0 waits 30), the second's rank 0's at 150 (rank 1
    waits 10).

    idle-breakdown, stream 9 of rank 0: window [50, 160) = 110, kernels 60
    of which 30 waiting, so 80 idle: collective 30, host 49 (the gap
    [100, 150) until the launch at 149), other 1. Rank 1: window [80, 160)
    = 80, kernels 40 of which 10 waiting: idle 50 = collective 10 + host 39
    ([100, 139)) + other 1. Stream 7 of each: one kernel, nothing idle.
    comm-compute-overlap: rank 0 comm 60, compute 50, overlap 0; rank 1
    comm 40, compute 80, overlap 0."""
    meta = {"Collective name": "allreduce", "Process Group Name": "0", "Process Group Ranks": "[0, 1]"}
    gemm = "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x256x64_MI16x16x1_CM"
    job = {
        0: [(gemm, 7, 0, 50, {}), (MSCCL_SUM, 9, 50, 50, meta), (RCCL_GENERIC, 9, 150, 10, meta)],
        1: [(gemm, 7, 0, 80, {}), (MSCCL_SUM, 9, 80, 20, meta), (RCCL_GENERIC, 9, 140, 20, meta)],
    }
    files = [
        kineto_builder.write(tmp_path / f"rank{r}.json.gz", _kernel_trace(kernels, rank=r))
        for r, kernels in job.items()
    ]
    ingest(graph, files, "rccl-job")
    waits = run_analysis(graph, "stragglers", "rccl-job", {"min_caused_us": 0}).records()
    assert [(w["seq"], w["rank"], w["wait_us"]) for w in waits] == [
        (0, 0, pytest.approx(30.0)),
        (0, 1, pytest.approx(0.0)),
        (1, 0, pytest.approx(0.0)),
        (1, 1, pytest.approx(10.0)),
    ]
    idle = {
        (r["rank"], r["lane"].rsplit(":", 1)[-1]): r
        for r in run_analysis(graph, "idle-breakdown", "rccl-job").records()
    }
    expect = {
        (0, "9"): (110, 80, 30, 0, 49, 1),
        (1, "9"): (80, 50, 10, 0, 39, 1),
        (0, "7"): (50, 0, 0, 0, 0, 0),
        (1, "7"): (80, 0, 0, 0, 0, 0),
    }
    assert set(idle) == set(expect)
    for key, numbers in expect.items():
        row = idle[key]
        got = (row["window_us"], row["idle_us"], row["collective_us"], row["sync_us"], row["host_us"], row["other_us"])
        assert got == tuple(pytest.approx(n) for n in numbers), key
    overlap = [tuple(r[:5]) for r in run_analysis(graph, "comm-compute-overlap", "rccl-job").rows]
    assert overlap == [
        (0, "gpu", pytest.approx(60.0), pytest.approx(50.0), pytest.approx(0.0)),
        (1, "gpu", pytest.approx(40.0), pytest.approx(80.0), pytest.approx(0.0)),
    ]


def test_xplane_kernels_follow_the_same_rule(tmp_path):
    """A GPU capture whose streams run a DeepEP dispatch, an NVSHMEM put
    and a GEMM: the first two are communication, as in a Kineto trace."""
    gpu = Plane("/device:GPU:0")
    s1 = gpu.line(1, "Stream #1(Compute)")
    gpu.event(s1, DPSK_GEMM, 0, 5_000_000)
    s2 = gpu.line(2, "Stream #2(Compute)")
    gpu.event(s2, "deep_ep::intranode::dispatch", 1_000_000, 2_000_000)
    gpu.event(s2, NVSHMEM_RMA, 3_000_000, 1_000_000)
    host = Plane("/host:CPU")
    host.event(host.line(7, "tf_Compute/7"), "model/dense/MatMul:MatMul", 0, 1_000_000, "MatMul")
    path = tmp_path / "gpu.xplane.pb"
    path.write_bytes(space(host, gpu, Plane("Task Environment", {"profile_start_time": 1_000})))
    tf = xplane.parse(path)
    assert dict(zip(tf.kernels["name"], tf.kernels["kind"])) == {
        DPSK_GEMM: "compute",
        "deep_ep::intranode::dispatch": "communication",
        NVSHMEM_RMA: "communication",
    }
