"""The Hopper matmul planner: a matrix product -> a warp-specialised TMA + wgmma kernel node.

Input: a matrix product's shape, dtypes, operand strides and alignment (what ``linalg`` or a
kernel's specialisation knows), and the requested tiles. Output: a :class:`HopperMatmul`, the
decided IR node the Hopper templates render (``templates/hopper.py``), or a
:class:`TmaUnsupported` naming the rule that keeps TMA out (a stride, an alignment, a box).

The parts, CUTLASS-style, each a field of the node:

- **mainloop** (:class:`Mainloop`): a producer warpgroup whose one elected thread issues TMA
  bulk tensor copies of both operands into a ring of ``stages`` shared-memory stages, and
  ``consumers`` warpgroups that each multiply ``64 * atoms`` rows of the tile with wgmma
  m64nNk16 straight from the swizzled stages (``atoms`` instructions per K step: 256 x 128
  tiles with two consumers of 128 rows); mbarriers with parity waits hand each stage over
  (full: the copies landed; empty: every consumer is done reading it); ``setmaxnreg`` gives
  the consumers the registers the producer does not need (``pingpong``: two consumers take
  turns, a whole tile each, so one's epilogue overlaps the other's mainloop). With
  ``cluster = 2`` two CTAs of a
  thread-block cluster, neighbours along M, share B's tile: each loads half of it and TMA
  multicasts that half into both CTAs' stages; a stage is refilled once the consumers of both
  CTAs released it (their arrivals reach the peer's empty barrier through ``mapa``).
- **operands** (:class:`TmaOperand`): per operand, the tensor map's 2-D view (which axis is
  contiguous, the box, the 128-byte swizzle) and the shared tile it fills.
- **epilogue** (:class:`Epilogue`): alpha, bias, activation and the store: from registers,
  or through a swizzled staging tile and TMA stores (the whole tile, or ``store_panels``
  buffers of one 128-byte panel of columns per consumer, so the ring keeps a stage more).
- **scheduler** (:class:`Scheduler`): a persistent grid of at most one block (one cluster)
  per SM (pair of SMs) walking output tiles in grouped (L2-friendly) order.

:func:`plan_matmul` checks that each operand is TMA-addressable: rank 2 with one unit stride,
the other stride a multiple of 16 bytes, a 16-byte aligned base, box dimensions of at most 256
elements with 128-byte inner rows.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ...dtypes import ELEMENT_SIZES, FP8, WGMMA_TYPES
from ...errors import CompileError
from ...target import HOPPER, Target

# what TMA allows (the CUDA driver API's cuTensorMapEncodeTiled rules)
TMA_MAX_BOX = 256  # elements per box dimension
TMA_STRIDE_ALIGN = 16  # bytes: global strides and the base address
SWIZZLE_BYTES = 128  # the swizzle wgmma and SmemTile share: one box row is 128 bytes
HOPPER_ARCH = HOPPER.arch  # what this planner plans for: wgmma, TMA and setmaxnreg need sm_90a

# operand dtypes -> wgmma's type name; f32 operands are multiplied as TF32 (the tensor cores
# read each f32's sign, exponent and top 10 mantissa bits: TF32 by truncation, as cuBLAS's)
WGMMA_DTYPES = WGMMA_TYPES  # (dtypes.ELEMENTS)
ITEMSIZE = ELEMENT_SIZES
KMAJOR_ONLY = (*FP8, "f32")  # wgmma transposes only 16-bit operands in shared memory


class TmaUnsupported(CompileError):
    """An operand that TMA cannot address, and why (raised only when TMA was asked for)."""


@dataclass(frozen=True)
class TmaOperand:
    """One operand's tensor map and shared tile.

    The tensor map views the operand as 2-D ``[outer, inner]`` with ``inner`` contiguous;
    ``kmajor`` says whether inner is K. Its box is ``[box_rows, 64 elements]`` (128 bytes,
    the swizzle span); a stage holds ``panels`` boxes side by side along inner, i.e. the
    ``SmemTile<T, rows, cols>`` with ``cols = panels * 64``.
    """

    name: str  # "a" or "b"
    dtype: str
    kmajor: bool
    rows: int  # the shared tile's rows (the tensor map's outer box extent)
    cols: int  # the shared tile's columns (inner; a multiple of the 128-byte panel)
    split: int = 1  # CTAs of a cluster that each load 1/split of the tile and multicast it

    @property
    def panel(self) -> int:
        return SWIZZLE_BYTES // ITEMSIZE[self.dtype]

    @property
    def panels(self) -> int:
        return self.cols // self.panel

    @property
    def box(self) -> tuple[int, int]:
        """(inner, outer) box extent in elements, as cuTensorMapEncodeTiled takes it; a split
        operand's CTA loads all panels of 1/split of the rows (K-major) or 1/split of the
        panels (inner is M or N)."""
        return (self.panel, self.rows // self.split if self.kmajor else self.rows)

    @property
    def share(self) -> int:
        """What one CTA of a split loads: rows of every panel (K-major), else whole panels."""
        return self.rows // self.split if self.kmajor else self.panels // self.split

    @property
    def stage_bytes(self) -> int:
        return self.rows * self.cols * ITEMSIZE[self.dtype]


@dataclass(frozen=True)
class Mainloop:
    """The warp-specialised K loop: tile BM x BN x BK, ``stages`` deep, 1 producer and
    ``consumers`` wgmma warpgroups (64 rows each), registers rebalanced by setmaxnreg."""

    bm: int
    bn: int
    bk: int
    stages: int
    consumers: int
    producer_regs: int
    consumer_regs: int
    instruction: str  # wgmma's operand type name ("f16", "bf16", "e4m3", "e5m2")
    atoms: int = 1  # m64 wgmma instructions per K step of a consumer (its rows / 64)
    cluster: int = 1  # CTAs per cluster along M (2: B's tile multicast to both)
    pingpong: bool = False  # the consumers take turns, a whole tile each (BM = their rows)
    split_k: int = 1  # work units per output tile, each a slice of K (split-K; see Scheduler)

    @property
    def consumer_rows(self) -> int:
        return 64 * self.atoms

    @property
    def k_step(self) -> int:
        """K per wgmma instruction: 32 bytes of it (16 for 16-bit types, 32 for fp8, 8 for
        TF32)."""
        return {"e4m3": 32, "e5m2": 32, "tf32": 8}.get(self.instruction, 16)

    @property
    def threads(self) -> int:
        return 128 * (self.consumers + 1)


@dataclass(frozen=True)
class Epilogue:
    """out = act(alpha * acc + bias), rounded to ``out_dtype`` and stored from registers
    (``pairs``: two adjacent columns per access, when C's rows are contiguous and aligned)."""

    out_dtype: str
    bias_dtype: str | None
    activation: int  # kernels/matmul.c's ACT
    pairs: bool
    scaled: bool = False  # alpha is also multiplied by per-tensor scales read from the device
    tma_store: bool = False  # through a swizzled shared tile and TMA stores, not from registers
    store_panels: int = 0  # TMA stores from this many one-panel buffers per consumer (0: BM x BN)

    @property
    def panel(self) -> int:
        """Output columns per 128-byte panel of the staging tile."""
        return SWIZZLE_BYTES // ITEMSIZE[self.out_dtype]

    def staging_bytes(self, bm: int, bn: int, consumers: int) -> int:
        """Shared memory of the TMA-store staging: ``bm`` rows (every consumer's) of BN
        columns, or ``store_panels`` one-panel buffers of each consumer's rows."""
        if not self.tma_store:
            return 0
        if self.store_panels:
            return self.store_panels * bm * self.panel * ITEMSIZE[self.out_dtype]
        return bm * bn * ITEMSIZE[self.out_dtype]


@dataclass(frozen=True)
class Scheduler:
    """Persistent grouped order: ``group_m`` rows of tiles per group. With the mainloop's
    ``split_k`` > 1 the grid walks work units, ``split_k`` per output tile (consecutive, so a
    tile's units run side by side), unit s multiplying K blocks [s * per, (s + 1) * per) with
    per = cdiv(K / BK, split_k); each writes its f32 partial tile to a global workspace and
    counts itself on the tile's counter; the unit that counts last adds the partials in the
    order s = 0, 1, ... (the same sum whichever unit is last: deterministic), runs the
    epilogue and sets the counter back to 0 for the next launch."""

    group_m: int


@dataclass(frozen=True)
class HopperMatmul:
    """The decided IR node of one Hopper matmul specialisation."""

    name: str
    mainloop: Mainloop
    a: TmaOperand
    b: TmaOperand
    epilogue: Epilogue
    scheduler: Scheduler
    watchdog: int = 0  # > 0: mbarrier waits trap after this many tries (a debugging aid)

    @property
    def shared_bytes(self) -> int:
        """Dynamic shared memory: the stages, the barriers, and 1024 bytes of alignment."""
        m = self.mainloop
        ring = m.stages * (self.a.stage_bytes + self.b.stage_bytes)
        staging = self.epilogue.staging_bytes(m.consumers * m.consumer_rows, m.bn, m.consumers)
        order = 2 * 8 if m.pingpong else 0  # the consumers' turn barriers
        last = 16 if m.split_k > 1 else 0  # split-K: whether this block's unit is the tile's last
        return ring + staging + 2 * 8 * m.stages + order + last + 1024

    @property
    def stage_bytes(self) -> int:
        return self.a.stage_bytes + self.b.stage_bytes

    @property
    def key(self) -> tuple:
        """A printable specialisation key."""
        m, e = self.mainloop, self.epilogue
        return (
            self.name,
            self.a.dtype,
            e.out_dtype,
            e.bias_dtype,
            e.activation,
            e.pairs,
            e.scaled,
            e.tma_store,
            e.store_panels,
            "k" if self.a.kmajor else "t",
            "k" if self.b.kmajor else "t",
            m.bm,
            m.bn,
            m.bk,
            m.stages,
            m.consumers,
            m.atoms,
            m.cluster,
            m.pingpong,
            self.scheduler.group_m,
            self.watchdog,
        ) + ((f"split{m.split_k}",) if m.split_k > 1 else ())  # unsplit keys as before

    @property
    def label(self) -> str:
        """The configuration in a few words (reports, sweeps): tile, stages, group, the
        consumers' rows, cluster and epilogue."""
        m, e = self.mainloop, self.epilogue
        text = f"{m.bm}x{m.bn}x{m.bk} s{m.stages} g{self.scheduler.group_m}"
        text += f" {m.consumers}x{m.consumer_rows}rows" + (" pingpong" if m.pingpong else "")
        text += f" cluster{m.cluster}" if m.cluster > 1 else ""
        text += f" split{m.split_k}" if m.split_k > 1 else ""
        panels = f"/{e.store_panels}panel" if e.store_panels else ""
        store = f"tma-store{panels}" if e.tma_store else "register"
        return f"{text} {store} epilogue"


@dataclass(frozen=True)
class HopperConfig:
    """Requested tiles of the Hopper path: BM = 64 x atoms x consumers (``atoms`` m64 wgmma
    instructions per consumer and K step: 256 x 128 with atoms=2 runs two consumers of 128
    rows); ``cluster`` CTAs along M share B's tile by TMA multicast (1 or 2);
    ``store_panels``: a TMA-store epilogue staged through this many (1 or 2) one-panel buffers
    of 128 bytes of columns per consumer instead of the whole output tile (a stage more fits;
    two let a panel's store overlap the next panel's staging); ``pingpong``: two consumers of
    BM = 64 x atoms rows that take turns, a tile each, one's epilogue under the other's
    mainloop (CUTLASS's ping-pong schedule); ``split_k``: work units per output tile, each a
    slice of K, their f32 partials added in a fixed order by the tile's last unit (products
    of few tiles and long K, which would leave most SMs idle)."""

    bm: int = 128
    bn: int = 256
    bk: int = 64
    stages: int = 4
    group_m: int = 8
    atoms: int = 1
    cluster: int = 1
    store_panels: int = 0
    pingpong: bool = False
    split_k: int = 1


MAX_SPLIT_K = 16  # work units per tile (the workspace holds split_k f32 tiles per tile)


def tma_operand_view(
    name: str, dtype: str, rows: int, cols: int, s_rows: int, s_cols: int, pointer: int | None
) -> tuple[bool, int]:
    """Whether a ``[rows, cols]`` operand with element strides (s_rows, s_cols) is viewed with
    cols contiguous (True) or rows contiguous (False), and its outer stride in bytes. Raises
    TmaUnsupported naming the rule broken."""
    size = ITEMSIZE[dtype]
    if s_cols == 1 and (cols > 1 or s_rows != 1):
        inner_contiguous, outer = True, s_rows
    elif s_rows == 1:
        inner_contiguous, outer = False, s_cols
    else:
        raise TmaUnsupported(
            f"operand {name} has strides ({s_rows}, {s_cols}): TMA needs one unit stride",
            None,
            "make the operand contiguous along one axis (a copy), or use the cp.async path",
        )
    if outer < 1 and min(rows, cols) > 1:
        raise TmaUnsupported(f"operand {name}: its outer stride {outer} must be positive", None)
    outer_bytes = max(outer, 1) * size
    if outer_bytes % TMA_STRIDE_ALIGN:
        raise TmaUnsupported(
            f"operand {name}: its row stride of {outer} elements ({outer_bytes} bytes) is not a "
            f"multiple of {TMA_STRIDE_ALIGN} bytes, which TMA requires",
            None,
            "pad the leading dimension to a multiple of 8 (16-bit) or 4 (32-bit) elements",
        )
    if pointer is not None and pointer % TMA_STRIDE_ALIGN:
        raise TmaUnsupported(
            f"operand {name}: its address is not {TMA_STRIDE_ALIGN}-byte aligned, which TMA "
            "requires",
            None,
            "pass a view that starts on a 16-byte boundary",
        )
    return inner_contiguous, outer_bytes


def plan_matmul(
    *,
    dtype: str,
    out_dtype: str,
    a_kmajor: bool,
    b_kmajor: bool,
    bias_dtype: str | None = None,
    activation: int = 0,
    pairs: bool = True,
    scaled: bool = False,
    tma_store: bool = False,
    config: HopperConfig = HopperConfig(),
    name: str = "hopper_matmul",
    watchdog: int = 0,
    target: Target | None = None,
) -> HopperMatmul:
    """The Hopper matmul node for operands of ``dtype`` (f16, bf16, fp8, or f32 multiplied as
    TF32) with the given K-major flags (A [M, K] is K-major when K is contiguous; B [K, N] when
    K is contiguous, as for a linear layer's weight). Raises TmaUnsupported for what the path
    cannot do. ``target``: whose limits it plans within (None: :data:`HOPPER_ARCH`'s)."""
    if target is None:
        target = Target.from_arch(HOPPER_ARCH)
    if dtype not in WGMMA_DTYPES:
        raise TmaUnsupported(
            f"the Hopper TMA path multiplies f16, bf16, fp8 (f8e4m3, f8e5m2) and f32 as TF32, "
            f"not {dtype}",
            None,
            "f64 products run on the interpreter",
        )
    if dtype in KMAJOR_ONLY and not (a_kmajor and b_kmajor):
        raise TmaUnsupported(
            f"wgmma reads {dtype} operands K-major only (A [M, K] row-major, B [K, N] "
            "column-major, as torch._scaled_mm and a linear layer's weight have them)",
            None,
            "transpose the operand into a K-contiguous copy",
        )
    c = config
    if dtype in KMAJOR_ONLY and c.bk == HopperConfig.bk:  # 128 bytes of K per stage row
        c = dataclasses.replace(c, bk=SWIZZLE_BYTES // ITEMSIZE[dtype])
    panel = SWIZZLE_BYTES // ITEMSIZE[dtype]
    if c.atoms not in (1, 2):
        raise TmaUnsupported(f"atoms={c.atoms}: a consumer multiplies 64 or 128 rows", None)
    rows = 64 * c.atoms
    if c.pingpong and c.bm != rows:
        raise TmaUnsupported(f"pingpong: BM={c.bm} must be one consumer's {rows} rows", None)
    if c.bm % rows or not 1 <= c.bm // rows <= 4 or c.bm > 256:
        raise TmaUnsupported(
            f"BM={c.bm}: one consumer warpgroup per {rows} rows, 1 to 4 of them, BM <= 256", None
        )
    if c.store_panels not in (0, 1, 2):
        raise TmaUnsupported(f"store_panels={c.store_panels}: 0 (the whole tile), 1 or 2", None)
    if c.cluster not in (1, 2) or (c.cluster > 1 and not HOPPER.clusters):
        raise TmaUnsupported(f"cluster={c.cluster}: clusters of 1 or 2 CTAs along M", None)
    if not 1 <= c.split_k <= MAX_SPLIT_K:
        raise TmaUnsupported(f"split_k={c.split_k}: 1 to {MAX_SPLIT_K} units per tile", None)
    if c.split_k > 1 and (c.cluster > 1 or c.pingpong):
        raise TmaUnsupported(
            f"split_k={c.split_k}: split-K runs without clusters and ping-pong (one unit per "
            "block at a time, every consumer on it)",
            None,
        )
    if c.bn % 16 or not 16 <= c.bn <= TMA_MAX_BOX:
        raise TmaUnsupported(f"BN={c.bn}: wgmma takes N a multiple of 16 up to 256", None)
    if c.bk % panel:
        raise TmaUnsupported(f"BK={c.bk}: a multiple of the {panel}-element swizzle panel", None)
    # A [M, K]: K-major -> tile [BM][BK]; M-major -> tile [BK][BM] (panels along M)
    a = TmaOperand("a", dtype, a_kmajor, *((c.bm, c.bk) if a_kmajor else (c.bk, c.bm)))
    b = TmaOperand("b", dtype, b_kmajor, *((c.bn, c.bk) if b_kmajor else (c.bk, c.bn)), c.cluster)
    whole = b.rows if b.kmajor else b.panels
    if b.split > 1 and (b.share * b.split != whole or (b.kmajor and b.share % 8) or not b.share):
        raise TmaUnsupported(
            f"operand b: a [{b.rows}, {b.cols}] stage tile does not split into {b.split} "
            "multicast parts (whole panels, or at least 8 rows of each)",
            None,
        )
    for op in (a, b):
        if op.cols % op.panel or op.rows > TMA_MAX_BOX:
            raise TmaUnsupported(
                f"operand {op.name}: a [{op.rows}, {op.cols}] stage tile does not split into "
                f"TMA boxes of [at most {TMA_MAX_BOX}, {op.panel}]",
                None,
            )
    consumers = 2 if c.pingpong else c.bm // rows
    producer_regs = 40
    budget = target.registers_per_sm - 128 * producer_regs
    consumer_regs = min(232, budget // (128 * consumers) // 8 * 8)
    node = HopperMatmul(
        name=name,
        mainloop=Mainloop(
            c.bm,
            c.bn,
            c.bk,
            c.stages,
            consumers,
            producer_regs,
            consumer_regs,
            WGMMA_DTYPES[dtype],
            c.atoms,
            c.cluster,
            c.pingpong,
            c.split_k,
        ),
        a=a,
        b=b,
        epilogue=Epilogue(
            out_dtype,
            bias_dtype,
            activation,
            pairs,
            scaled,
            tma_store,
            c.store_panels if tma_store else 0,
        ),
        scheduler=Scheduler(c.group_m),
        watchdog=watchdog,
    )
    if tma_store and (c.bn * ITEMSIZE[out_dtype]) % SWIZZLE_BYTES:
        raise TmaUnsupported(
            f"a TMA-store epilogue needs BN x {ITEMSIZE[out_dtype]} bytes a multiple of "
            f"{SWIZZLE_BYTES}, got BN={c.bn}",
            None,
        )
    if node.shared_bytes > target.max_shared_per_block:
        raise TmaUnsupported(
            f"{c.stages} stages of {node.stage_bytes} bytes need {node.shared_bytes} bytes of "
            f"shared memory; a {target.arch} block may have {target.max_shared_per_block}",
            None,
            "use fewer stages or smaller tiles",
        )
    return node
