"""Write and execute the tutorial notebooks of docs/notebooks/.

Input: the cells below. Output: docs/notebooks/*.ipynb, executed on the NumPy interpreter
(no GPU; the resources tables come from NVRTC for sm_90/sm_90a) with their outputs, which the
book renders (mkdocs-jupyter). tests/test_notebooks.py executes them again in CI.

    python tools/make_notebooks.py            # write and execute every notebook
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parents[1] / "docs" / "notebooks"


def md(text: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_markdown_cell(text.strip())


def code(text: str, *tags: str) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(text.strip())
    if tags:
        cell.metadata["tags"] = list(tags)
    return cell


VECTOR_ADD_TO_SOFTMAX = [
    md("""
# From vector add to softmax, in a notebook

A `%%teeny_tx NAME` cell is a kernel file: its text is compiled as a module called `NAME`,
bound to `NAME` here and displayed. The cell stays the kernel's source; nothing is written to
disk. The kernels run on the NumPy interpreter (`kernel.interpret[grid](...)`), so this page
needs no GPU; on one, `kernel[grid](...)` launches the same kernel with CuPy or torch arrays.
"""),
    code("""
%load_ext teeny_tx.notebook
import numpy as np
import teeny_tx
from teeny_tx import cdiv
"""),
    md("## Vector add"),
    code("""
%%teeny_tx vadd
kernel vector_add(const any *a, const any *b, any *out, i32 n, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = offs < n;
    store(out + offs, load(a + offs, mask, 0) + load(b + offs, mask, 0), mask);
}
"""),
    md("""
One program adds `BLOCK` elements; the mask keeps the last program inside the arrays. An odd
size checks the edge:
"""),
    code("""
rng = np.random.default_rng(20261202)
n = 1000
a, b = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
out = np.empty_like(a)
vadd.vector_add.interpret[(cdiv(n, 256),)](a, b, out, n, BLOCK=256)
assert np.array_equal(out, a + b)
print("max error", np.abs(out - (a + b)).max())
"""),
    md("""
`teeny_tx.show(kernel, *args, **constexprs)` specialises the kernel (dtype names stand for
arrays) and shows the CUDA it becomes, cut at each statement and linked to its line of the
cell, with what ptxas says it uses. The target is named here because this page is built
without a GPU.
"""),
    code("""
teeny_tx.show(vadd.vector_add, "f32", "f32", "f32", n, BLOCK=256, target="sm_90")
"""),
    md("## A row softmax"),
    md("""
One program normalises one row: it loads the row into a tile of `BLOCK` columns (masked-off
columns load minus infinity, so they add nothing to the sum), subtracts the row's maximum,
exponentiates and divides by the sum. `acc_t` is the accumulation type (f32 for f16 and bf16
inputs).
"""),
    code("""
%%teeny_tx row_softmax
kernel softmax(any *out, const any *x, i32 n_cols, i32 x_stride, i32 out_stride,
               const i32 BLOCK)
{
    i32 row = program_id(0);
    tile cols = arange(0, BLOCK);
    tile mask = cols < n_cols;
    tile v = (acc_t)load(x + row * x_stride + cols, mask, -INF);
    tile e = exp(v - max(v, 0));
    store(out + row * out_stride + cols, e / sum(e, 0), mask);
}
"""),
    code("""
rows, cols = 37, 300
x = rng.standard_normal((rows, cols), dtype=np.float32)
y = np.empty_like(x)
row_softmax.softmax.interpret[(rows,)](y, x, cols, x.shape[1], y.shape[1], BLOCK=512)
e = np.exp(x - x.max(axis=1, keepdims=True))
expected = e / e.sum(axis=1, keepdims=True)
print("max error", np.abs(y - expected).max())
assert np.allclose(y, expected, rtol=1e-5, atol=1e-7)
"""),
    md("""
The reductions (`max`, `sum`) combine across the warps of the block through shared memory;
the table shows it, and how the warps change the registers and the occupancy:
"""),
    code("""
teeny_tx.show(row_softmax.softmax, "f32", "f32", cols, cols, cols, BLOCK=512, num_warps=4,
              target="sm_90")
"""),
    md("## A mistake, located"),
    md("""
A kernel error in a cell (here a missing semicolon) is shown as the compiler's message,
pointing at the cell's line, not as a Python traceback; so is one found when a kernel is
specialised by `show` or a launch:
"""),
    code(
        """
%%teeny_tx broken
kernel scale(f32 *x, i32 n, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK)
    store(x + offs, 2 * load(x + offs, offs < n, 0), offs < n);
}
""",
        "raises-exception",
    ),
    code(
        """
%%teeny_tx typo
kernel scale(f32 *x, i32 n, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    store(x + offs, 2 * lod(x + offs, offs < n, 0), offs < n);
}
"""
    ),
    code('teeny_tx.show(typo.scale, "f32", 100, BLOCK=128, target="sm_90")', "raises-exception"),
]

MATMUL_EPILOGUE = [
    md("""
# A matmul with a fused epilogue, and what it costs

A tiled matrix product whose epilogue adds a bias and applies ReLU before the one store, so
the product never goes to memory unbiased. It runs here on the NumPy interpreter; the
resources tables are ptxas's, for the portable `sm_90` target (`mma.sync`) and for Hopper's
`sm_90a` (`wgmma`). On a GPU, `teeny-tx profile` (or `teeny_tx.profile`) times it against the
roofline.
"""),
    code("""
%load_ext teeny_tx.notebook
import numpy as np
import teeny_tx
from teeny_tx import cdiv
"""),
    code("""
%%teeny_tx mm
kernel matmul_bias_relu(f32 *c, const any *a, const any *b, const f32 *bias,
                        i32 M, i32 N, i32 K, const i32 BM, const i32 BN, const i32 BK)
{
    tile rm = program_id(0) * BM + arange(0, BM);
    tile rn = program_id(1) * BN + arange(0, BN);
    tile rk = arange(0, BK);
    acc_t acc[BM][BN] = 0;
    for (i32 k = 0; k < K; k += BK) {
        tile a_t = load(a + expand_dims(rm, 1) * K + expand_dims(rk + k, 0),
                        (expand_dims(rm, 1) < M) & (expand_dims(rk + k, 0) < K), 0);
        tile b_t = load(b + expand_dims(rk + k, 1) * N + expand_dims(rn, 0),
                        (expand_dims(rk + k, 1) < K) & (expand_dims(rn, 0) < N), 0);
        acc = dot(a_t, b_t, acc);
    }
    tile out = acc + expand_dims(load(bias + rn, rn < N, 0), 0);
    out = where(out < 0.0f, 0.0f, out);
    store(c + expand_dims(rm, 1) * N + expand_dims(rn, 0), out,
          (expand_dims(rm, 1) < M) & (expand_dims(rn, 0) < N));
}
"""),
    md("Ragged sizes check every edge mask; f16 operands accumulate in f32:"),
    code("""
rng = np.random.default_rng(7)
M, N, K = 70, 50, 40
a = rng.standard_normal((M, K)).astype(np.float16)
b = rng.standard_normal((K, N)).astype(np.float16)
bias = rng.standard_normal(N, dtype=np.float32)
c = np.empty((M, N), np.float32)
mm.matmul_bias_relu.interpret[(cdiv(M, 32), cdiv(N, 32))](c, a, b, bias, M, N, K,
                                                          BM=32, BN=32, BK=16)
expected = np.maximum(a.astype(np.float32) @ b.astype(np.float32) + bias, 0)
print("max error", np.abs(c - expected).max())
assert np.allclose(c, expected, rtol=1e-3, atol=1e-3)
"""),
    md("""
## Its resources

A 128 x 128 tile over 8 warps on the portable target: the accumulator is 64 f32 registers
per thread, and the table says what that leaves for the rest and how many blocks an SM holds.
"""),
    code("""
teeny_tx.show(mm.matmul_bias_relu, "f32", "f16", "f16", "f32", 4096, 4096, 4096,
              BM=128, BN=128, BK=32, num_warps=8, target="sm_90")
"""),
    md("""
The same tile on Hopper's `wgmma` (the `sm_90a` target), its operands staged in shared memory:
"""),
    code("""
teeny_tx.show(mm.matmul_bias_relu, "f32", "f16", "f16", "f32", 4096, 4096, 4096,
              BM=128, BN=128, BK=32, num_warps=8, num_stages=3, target="sm_90a")
"""),
    md("""
## Its profile

`teeny_tx.profile` takes the launch's grid and arguments, the bytes it moves and the flops it
does. On a GPU it times the launch and compares TB/s and TFLOP/s with the H200's measured
ceilings; here, without one, it places the kernel by its arithmetic intensity (flops per byte)
against the roofline's ridge and reports the resources. A kernel that spilled would be
reported with its largest tiles and the `num_warps` that compiles without spills.
"""),
    code("""
M = N = K = 4096
p = teeny_tx.profile(mm.matmul_bias_relu, (M // 128, N // 128), "f32", "f16", "f16", "f32",
                     M, N, K, BM=128, BN=128, BK=32, num_warps=8, num_stages=3,
                     bytes=2 * M * K + 2 * K * N + 4 * M * N + 4 * N, flops=2 * M * N * K,
                     target="sm_90a")
print(p.report())
"""),
]

NOTEBOOKS = {
    "vector-add-to-softmax.ipynb": VECTOR_ADD_TO_SOFTMAX,
    "matmul-epilogue.ipynb": MATMUL_EPILOGUE,
}


def build(name: str, cells: list, execute: bool = True) -> nbformat.NotebookNode:
    """The notebook ``name`` of ``cells``, executed in docs/notebooks/ when ``execute``."""
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nb.metadata["kernelspec"]["language"] = "python"
    nb.metadata["language_info"] = {"name": "python"}
    if execute:
        NotebookClient(nb, timeout=300, resources={"metadata": {"path": str(HERE)}}).execute()
    for i, cell in enumerate(nb.cells):  # stable ids: the files diff only where cells change
        cell["id"] = f"{Path(name).stem}-{i}"
        if cell.cell_type == "code":
            cell.metadata.pop("execution", None)
    return nb


def main(argv: list[str]) -> int:
    for name, cells in NOTEBOOKS.items():
        if argv and name not in argv:
            continue
        nbformat.write(build(name, cells), HERE / name)
        print(f"wrote {HERE / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
