"""speed.profile on the CPU (the GPU run is `make gpu-profile`): its sections, time shares that add up to the
profiled span, and the training steps timed after each evaluation pass."""
import json
from pathlib import Path

import pytest

from speed import profile

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["model.d_model=32", "model.max_seq_len=64", "train.batch_size=2", "train.eval_tokens=256", "run.device=cpu"]


def test_the_profile_reports_the_step_its_time_shares_top_kernels_and_training_after_evaluation(tmp_path):
    profile.main(["--config", str(ROOT / "configs/tiny.yaml"), "--steps", "2", "--warmup", "1", "--evaluations", "2",
                  "--out", str(tmp_path), *SMALL])
    text = (tmp_path / "profile.md").read_text()
    for section in ("## The step", "## Where the time goes", "## Top operators by CPU self time",
                    "## Training after evaluation"):
        assert section in text
    results = json.loads((tmp_path / "profile.json").read_text())
    shares = results["shares"]
    assert set(shares) == {"matmul", "attention", "elementwise and other", "idle"}
    for measured in (shares, results["shares_after"]):  # before and after the evaluations
        assert sum(measured.values()) == pytest.approx(1.0, abs=0.01) and min(measured.values()) >= 0
    # the linear layers and SDPA are found by name; how large their shares are is timing, which no test asserts
    assert shares["matmul"] > 0 and shares["attention"] > 0
    assert "| total | 100.0% | 100.0% |" in text
    # which operator comes first is timing too (one slow view op once topped a 2-step profile): the list is sorted,
    # and the matrix products are in it under their category
    top = results["top"]
    assert [k["ms"] for k in top] == sorted((k["ms"] for k in top), reverse=True)
    assert [k["category"] for k in top if k["name"] == "aten::mm"] == ["matmul"]
    assert results["tokens_per_s"] > 0 and results["mfu"] is None
    assert [e["when"] for e in results["evaluations"]] == ["before", "after evaluation 1", "after evaluation 2"]
    assert all(e["tokens_per_s"] > 0 and e["graphs"] == 0 for e in results["evaluations"])


@pytest.mark.parametrize("name, want", [
    ("aten::mm", "matmul"), ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "matmul"),
    ("nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_NNT", "matmul"),
    ("pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits>", "attention"),
    ("aten::_scaled_dot_product_flash_attention_for_cpu_backward", "attention"),
    ("triton_per_fused__to_copy_add_mean_mul_pow_rsqrt_0", "elementwise and other"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>", "elementwise and other")])
def test_kernels_are_sorted_into_categories_by_name(name, want):
    assert profile.category(name) == want


def test_a_gpu_profile_counts_kernels_and_not_the_ranges_annotating_them():
    # the H100 profile counted "Optimizer.step#AdamW.step" beside the optimizer's own kernels: shares past 100%
    from types import SimpleNamespace
    from torch.autograd import DeviceType
    from speed.profile import kernels_of

    def event(name, start, end, annotation=False, device=DeviceType.CUDA):
        return SimpleNamespace(name=name, time_range=SimpleNamespace(start=start, end=end), device_type=device,
                               is_user_annotation=annotation, self_cpu_time_total=0.0)
    events = [event("Optimizer.step#AdamW.step", 0.0, 10.0, annotation=True),
              event("multi_tensor_apply_kernel", 1.0, 9.0), event("aten::mm", 0.0, 3.0, device=DeviceType.CPU)]
    assert [(k.name, k.time) for k in kernels_of(events, cuda=True)] == [("multi_tensor_apply_kernel", 8.0)]
