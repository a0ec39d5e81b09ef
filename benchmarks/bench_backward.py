"""The hand-written backward functions (walkthrough.model.backward) against autograd, at the source articles' sizes.

Each is written for reading, not speed: the goal is only that it stays within a small factor of autograd
(which runs the same maths in fused C++ kernels). Prints, per function, the best-of-20 time (one thread) of ours and of
``torch.autograd.grad`` on the same forward, and their ratio. Also times ``trace_gradients`` (a backward pass
on the meta device at the paper's base sizes) and ``training_memory``'s measurement on the meta device.

    .venv/bin/python benchmarks/bench_backward.py
"""


import torch
import torch.nn.functional as F
from timing import best_of

import walkthrough as wt

B, H, L, D_K, D, V = 32, 8, 10, 64, 512, 30000


def autograd(forward, inputs, d_out):
    inputs = [x.detach().requires_grad_() for x in inputs]
    return lambda: torch.autograd.grad(forward(*inputs), inputs, d_out)


def main() -> None:
    torch.set_num_threads(1)  # on a shared machine a second thread mostly waits for its neighbours
    torch.manual_seed(0)
    q, k, v, d_context = (torch.randn(B, H, L, D_K) for _ in range(4))
    mask = torch.ones(B, 1, 1, L, dtype=torch.bool)
    x, weight, d_y = torch.randn(B, L, D), torch.randn(D, D), torch.randn(B, L, D)
    logits, labels = torch.randn(B * 4, V), torch.randint(1, V, (B * 4,))
    gamma = torch.randn(D)
    cases = {
        "attention_backward": (lambda: wt.backward.attention_backward(q, k, v, d_context, mask),
                               autograd(lambda q, k, v: wt.scaled_dot_product_attention(q, k, v, mask)[0],
                                        [q, k, v], d_context)),
        "linear_backward": (lambda: wt.backward.linear_backward(x, weight, d_y),
                            autograd(F.linear, [x, weight, torch.zeros(D)], d_y)),
        "layer_norm_backward": (lambda: wt.backward.layer_norm_backward(x, gamma, d_y, 1e-5),
                                autograd(lambda x, w, b: F.layer_norm(x, (D,), w, b), [x, gamma, torch.zeros(D)],
                                         d_y)),
        "cross_entropy_backward": (lambda: wt.backward.cross_entropy_backward(logits, labels, 0, 0.1),
                                   autograd(lambda z: F.cross_entropy(z, labels, ignore_index=0, label_smoothing=0.1),
                                            [logits], torch.tensor(1.0))),
    }
    print(f"{'function':<24} {'ours':>9} {'autograd':>9} {'ratio':>6}")
    for name, (ours, theirs) in cases.items():
        mine, reference = best_of(20, ours), best_of(20, theirs)
        print(f"{name:<24} {mine * 1e3:7.2f}ms {reference * 1e3:7.2f}ms {mine / reference:6.2f}")
    cfg = wt.ModelConfig.paper_base()
    traced = best_of(1, lambda: wt.gradients.trace_gradients(cfg, 32, 10, 4))
    with torch.device("meta"):
        model = wt.Transformer(cfg)
    batch = wt.memory.training_batch(cfg, 32, 10, 4, device="meta")
    measured = best_of(3, lambda: wt.memory.measure_saved(model, *batch))
    print(f"trace_gradients at the paper's base sizes (meta device): {traced:.2f} s; "
          f"measure_saved there: {measured:.2f} s")


if __name__ == "__main__":
    main()
