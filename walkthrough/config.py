"""Model sizes, checked once so every later shape error has a clear cause."""

from __future__ import annotations

import functools
import os
import threading
from dataclasses import dataclass, field, fields
from pathlib import Path

from .i18n import _

try:
    import resource  # Unix: the process's own limits
except ImportError:  # Windows has no RLIMIT_AS
    resource = None

_calls = threading.local()  # .checked: True while a public call that checked its inputs runs (per thread)


def checks_inputs(check):
    """Decorate a public method so ``check(self, *args, **kwargs)`` runs first, once per public call.

    Inside a call that already checked (the model's ids checked by ``Transformer.forward``), inner public
    methods (each embedding, each attention layer) skip their checks: the inputs they get are the model's own.
    Called directly (``wt.MultiHeadAttention(...)(x, x, x)``), a layer checks its inputs itself.
    """
    def decorate(method):
        @functools.wraps(method)
        def checked(*args, **kwargs):
            if getattr(_calls, "checked", False):
                return method(*args, **kwargs)
            check(*args, **kwargs)
            _calls.checked = True
            try:
                return method(*args, **kwargs)
            finally:
                _calls.checked = False
        return checked
    return decorate


def check_positive_int(name: str, value, hint: str = "") -> None:
    """Raise a ValueError (or TypeError) naming ``name`` unless ``value`` is an int >= 1."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(_("{name} must be a whole number, got {value!r} ({type}){hint}").format(
            name=name, value=value, type=type(value).__name__, hint=hint))
    if value < 1:
        raise ValueError(_("{name} must be at least 1, got {value}{hint}").format(name=name, value=value, hint=hint))


def check_token_id(name: str, value, vocab_size: int) -> None:
    """A single token id (pad, sos, eos): a whole number in [0, vocab_size)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(_("{name} must be a whole-number token id, got {value!r} ({type})").format(
            name=name, value=value, type=type(value).__name__))
    if not 0 <= value < vocab_size:
        raise ValueError(_("{name} must be a token id in [0, {vocab_size}), got {value}").format(
            name=name, vocab_size=vocab_size, value=value))


def check_heads(d_model: int, num_heads: int, num_kv_heads: int | None = None) -> None:
    """d_model splits into num_heads heads of d_k; num_kv_heads (grouped-query attention) divides num_heads."""
    check_positive_int("d_model", d_model)
    check_positive_int("num_heads", num_heads)
    if d_model % num_heads:
        fits = [h for h in range(1, min(d_model, 64) + 1) if d_model % h == 0]
        raise ValueError(_("d_model={d_model} is not divisible by num_heads={num_heads}: each head gets "
                         "d_model / num_heads features, so pick num_heads from {fits} or change d_model").format(
                             d_model=d_model, num_heads=num_heads, fits=fits))
    if num_kv_heads is not None:
        check_positive_int("num_kv_heads", num_kv_heads)
        if num_heads % num_kv_heads:
            fits = [h for h in range(1, num_heads + 1) if num_heads % h == 0]
            raise ValueError(_("num_kv_heads={num_kv_heads} does not divide num_heads={num_heads}: each K/V head "
                             "serves a whole group of query heads, so pick num_kv_heads from {fits}").format(
                                 num_kv_heads=num_kv_heads, num_heads=num_heads, fits=fits))


def check_same_batch(**tensors) -> None:
    """Every named tensor has the same batch size (dim 0): one source sentence per target sentence."""
    sizes = {name: t.size(0) for name, t in tensors.items()}
    if len(set(sizes.values())) > 1:
        listed = ", ".join(f"{name} has {size}" for name, size in sizes.items())
        raise ValueError(_("batch sizes differ: {listed}; each must hold the same sentences (one row per sentence)")
            .format(listed=listed))


def check_rope_pairs(d_k: int) -> None:
    """Rotary positions turn features in pairs (2i, 2i+1): d_k must be even."""
    if d_k % 2:
        raise ValueError(_("rotary positions turn features in pairs, so d_k must be even, got d_k={d_k}; "
                         "d_k = d_model / num_heads: change d_model or num_heads").format(d_k=d_k))


def validate_dropout(dropout) -> None:
    """A dropout probability: a number in [0, 1), the one check of it wherever it is given."""
    message = _("dropout must be in [0, 1) (0 turns it off, 0.1 is the paper's), got {dropout!r}")
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)):
        raise TypeError(message.format(dropout=dropout))
    if not 0 <= dropout < 1:  # NaN fails this too
        raise ValueError(message.format(dropout=dropout))


def parameter_count(cfg: ModelConfig | GPTConfig) -> int:
    """Every learned number of the model ``cfg`` describes (a shared matrix counted once); tested equal to the
    built model's own count for every option, so it cannot drift from the model."""
    d, f, layers, bias = cfg.d_model, cfg.d_ff, cfg.num_layers, int(cfg.bias)
    linear = lambda n_in, n_out: n_in * n_out + bias * n_out  # noqa: E731 (a weight and, with bias, its shift)
    ffn_inputs = 3 if cfg.activation == "swiglu" else 2  # SwiGLU: W_1 and W_up read x, W_2 writes back
    feed_forward = (ffn_inputs - 1) * linear(d, f) + linear(f, d)
    norm = d + (bias * d if cfg.norm == "layer" else 0)  # a scale; LayerNorm also a shift (RMSNorm never)
    final_norm = norm if cfg.final_norm else 0
    positions = cfg.max_len * d if cfg.positions == "learned" else 0  # one learned table per embedding
    if isinstance(cfg, GPTConfig):
        kv = cfg.kv_heads * cfg.d_k  # K and V project to the K/V heads only
        attention = 2 * linear(d, d) + 2 * linear(d, kv)
        head = (0 if cfg.share_embeddings else d * cfg.vocab_size) + bias * cfg.vocab_size
        return cfg.vocab_size * d + positions + layers * (attention + feed_forward + 2 * norm) + final_norm + head
    attention = 4 * linear(d, d)
    embeddings = cfg.src_vocab_size * d + (0 if cfg.share_embeddings else cfg.tgt_vocab_size * d) + 2 * positions
    head = (0 if cfg.share_embeddings else d * cfg.tgt_vocab_size) + bias * cfg.tgt_vocab_size
    encoder = layers * (attention + feed_forward + 2 * norm) + final_norm
    decoder = layers * (2 * attention + feed_forward + 3 * norm) + final_norm
    return embeddings + encoder + decoder + head


def build_peak_bytes(cfg: ModelConfig | GPTConfig) -> int:
    """Peak memory of building the model in float32: weights, position tables, and one table more.

    A sinusoidal table [max_len, D] is filled from two temporaries of half its size (the angles, then their
    sines or cosines), so while the last table is built the process holds everything plus one table. RoPE
    builds no table; a learned table is a parameter. Tested against the peaks measured when building
    (tests/test_bad_input.py).
    """
    built = 0 if cfg.positions in ("rope", "learned") else 1  # learned tables are parameters, counted there
    tables = built * (1 if isinstance(cfg, GPTConfig) else 2)  # the encoder-decoder's two embeddings each hold one
    table = cfg.max_len * cfg.d_model
    return 4 * (parameter_count(cfg) + tables * table + (table if tables else 0))


def _read_number(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):  # absent, "max" (no limit), unreadable
        return None


def _cgroup_limits(cgroup: Path, membership: Path) -> list[tuple[int, str]]:
    """(bytes left, description) for every memory limit on this process's cgroup and its ancestors, v2 and v1.

    ``membership`` (/proc/self/cgroup) names the process's cgroup ("0::/a/b" in v2, "4:memory:/a/b" in v1);
    every level up to the root may limit it. In a container the root is usually the container's own.
    """
    try:
        lines = membership.read_text().splitlines()
    except OSError:
        lines = []
    places = [(cgroup, "memory.max", "memory.current"), (cgroup / "memory", "memory.limit_in_bytes",
                                                          "memory.usage_in_bytes")]
    for hierarchy, controllers, own in (line.split(":", 2) for line in lines if line.count(":") >= 2):
        if hierarchy == "0" or "memory" in controllers.split(","):
            base, limit_file, usage_file = places[0] if hierarchy == "0" else places[1]
            folder = base / own.lstrip("/")
            while folder != base and base in folder.parents:
                places.append((folder, limit_file, usage_file))
                folder = folder.parent
    found = []
    for folder, limit_file, usage_file in places:
        limit, usage = _read_number(folder / limit_file), _read_number(folder / usage_file)
        if limit is not None and usage is not None and limit < 2**60:  # v1 writes "no limit" as about 2**63
            found.append((limit - usage, f"the container's memory limit ({limit / 2**30:.1f} GiB, cgroup)"))
    return found


def memory_headroom(cgroup: Path = Path("/sys/fs/cgroup"),
                    membership: Path = Path("/proc/self/cgroup")) -> tuple[int, str] | None:
    """Bytes this process may still allocate and the limit that says so, the tightest of: its cgroup's memory
    limit (a container's, a hub's; v2 or v1, any level), its address-space limit (RLIMIT_AS), the machine's
    available memory. None where no limit can be read."""
    found = _cgroup_limits(cgroup, membership)
    if resource is not None:
        soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            pages = _read_number(Path("/proc/self/statm")) or 0  # the address space in use, in pages
            found.append((soft - pages * os.sysconf("SC_PAGE_SIZE"),
                          f"this process's address-space limit (RLIMIT_AS, {soft / 2**30:.1f} GiB)"))
    try:
        meminfo = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
        found.append((int(meminfo["MemAvailable"].split()[0]) * 1024, "the memory this machine has available"))
    except (OSError, KeyError, ValueError):  # not Linux: all of the machine's memory
        try:
            found.append((os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "this machine's memory"))
        except (ValueError, OSError, AttributeError):
            pass
    return min(found) if found else None


def check_fits_in_memory(cfg: ModelConfig | GPTConfig, what: str) -> None:
    """Refuse, before allocating anything, to build a model whose peak while building (``build_peak_bytes``)
    exceeds what this process may still allocate (``memory_headroom``)."""
    headroom = memory_headroom()
    needed = build_peak_bytes(cfg)
    if headroom is not None and needed > headroom[0]:
        room, limit = headroom
        raise ValueError(_("{what} would need about {needed_2_30:.1f} GiB while it is built (weights, position "
                         "tables and the temporaries that fill them), but {limit} leaves this process "
                         "{max_room_0_2_30:.1f} GiB: lower max_len, the vocabulary or the sizes (to see "
                         "shapes at any size, trace on the meta device: wt.trace_shapes)").format(
                             what=what, needed_2_30=needed / 2 ** 30, limit=limit,
                             max_room_0_2_30=max(room, 0) / 2 ** 30))


POSITIONS = ("sinusoidal", "sinusoidal_halves", "learned", "rope")
NORMS = ("layer", "rms")
ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu", "swiglu")


def _check_choice(name: str, value, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(_("{name} must be one of {choices}, got {value!r}").format(
            name=name, choices=choices, value=value))


def _check_bool(name: str, value) -> None:
    if not isinstance(value, bool):
        raise TypeError(_("{name} must be True or False, got {value!r}").format(name=name, value=value))


def _check_positive_number(name: str, value, usual: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(_("{name} must be a number > 0 ({usual} is usual), got {value!r}").format(
            name=name, usual=usual, value=value))


@dataclass(frozen=True)
class Block:
    """How every layer is built. The defaults are the source articles' block (post-norm LayerNorm, ReLU, biases).

    ``norm``: "layer" (LayerNorm) or "rms" (RMSNorm: no mean, no shift); ``norm_eps`` inside its square root.
    ``norm_first``: pre-norm, x + sublayer(norm(x)). ``activation``: the feed-forward's "relu", "gelu"
    (exact), "gelu_tanh" (GPT-2's), "silu" (swish, Marian's) or "swiglu" (Llama's: SiLU(x·W_1) ⊙ x·W_up,
    a third matrix). ``bias``: a shift in every linear (and LayerNorm). ``rope_base``: the base of the
    rotary angles (10000 in RoFormer, 500000 in Llama 3), used where attention rotates.
    """

    norm: str = "layer"
    norm_eps: float = 1e-5
    norm_first: bool = False
    activation: str = "relu"
    bias: bool = True
    rope_base: float = 10000.0

    def __post_init__(self) -> None:
        _check_choice("norm", self.norm, NORMS)
        _check_positive_number("norm_eps", self.norm_eps, "1e-5")
        _check_bool("norm_first", self.norm_first)
        _check_choice("activation", self.activation, ACTIVATIONS)
        _check_bool("bias", self.bias)
        _check_positive_number("rope_base", self.rope_base, "10000")


PAPER_BLOCK = Block()  # the source articles' block: every layer's default


def _check_model_options(cfg: ModelConfig | GPTConfig, vocab_size: int) -> None:
    """What both configs share: dropout, pad_id (None: no padding), positions, tying, the final norm, the block."""
    validate_dropout(cfg.dropout)
    if cfg.pad_id is not None:
        check_token_id("pad_id", cfg.pad_id, vocab_size)
    _check_choice("positions", cfg.positions, POSITIONS)
    if cfg.positions == "rope":
        check_rope_pairs(cfg.d_k)
    for name in ("share_embeddings", "final_norm", "scale_embeddings"):
        _check_bool(name, getattr(cfg, name))
    cfg.block  # noqa: B018 (builds the Block, which checks its own options)


OPTION = "option"  # a field's metadata key: an option added after the sizes (its default stays out of the repr)


@dataclass(frozen=True, kw_only=True)
class _Options:
    """The options both configs share (keyword-only: after each config's own fields), gathered for the layers."""

    scale_embeddings: bool = True
    final_norm: bool = True
    norm: str = "layer"
    norm_eps: float = 1e-5
    activation: str = "relu"
    bias: bool = True
    rope_base: float = 10000.0

    def __repr__(self) -> str:
        """The sizes, then only the options changed from their defaults: a default config reads as it always did."""
        in_order = sorted(fields(self), key=lambda f: f.kw_only)  # each config's own fields, then the shared options
        shown = [f"{f.name}={getattr(self, f.name)!r}" for f in in_order if not (f.kw_only or OPTION in f.metadata)
                 or getattr(self, f.name) != f.default]
        return f"{type(self).__name__}({', '.join(shown)})"

    @property
    def d_k(self) -> int:
        """Features per head."""
        return self.d_model // self.num_heads

    @property
    def block(self) -> Block:
        """This config's layer options."""
        return Block(self.norm, self.norm_eps, self.norm_first, self.activation, self.bias, self.rope_base)


@dataclass(frozen=True, repr=False)
class ModelConfig(_Options):
    """Every size the encoder-decoder needs. Frozen, so a config can key a cache.

    ``d_model`` must split evenly into ``num_heads`` heads of size ``d_k = d_model // num_heads``.
    ``share_embeddings`` (paper §3.4): one [V, D] matrix serves as source embedding, target embedding
    and output projection; it needs equal vocabularies. ``pad_id=None``: no token is padding.
    ``positions``: "sinusoidal" (the paper's table, sines and cosines interleaved), "sinusoidal_halves"
    (the same numbers, sines in the first half of the features: Marian's), "learned" (a [max_len, D]
    parameter) or "rope" (self-attention rotates Q and K by ``rope_base``). ``scale_embeddings``: the
    token vectors times sqrt(D). ``final_norm``: a norm after each stack. The rest is ``Block``'s.
    """

    src_vocab_size: int = 30000
    tgt_vocab_size: int = 30000
    d_model: int = 512
    num_heads: int = 8
    d_ff: int = 2048
    num_layers: int = 6
    max_len: int = 5000
    dropout: float = 0.1
    pad_id: int | None = 0
    share_embeddings: bool = False
    positions: str = field(default="sinusoidal", metadata={OPTION: True})
    norm_first: bool = field(default=False, metadata={OPTION: True})

    def __post_init__(self) -> None:
        for name in ("src_vocab_size", "tgt_vocab_size", "d_ff", "num_layers", "max_len"):
            check_positive_int(name, getattr(self, name))
        check_heads(self.d_model, self.num_heads)
        _check_model_options(self, min(self.src_vocab_size, self.tgt_vocab_size))
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError(_("share_embeddings=True needs one vocabulary for both sides, got src_vocab_size="
                             "{src_vocab_size} and tgt_vocab_size={tgt_vocab_size}: build a joint "
                             "vocabulary or set share_embeddings=False").format(
                                 src_vocab_size=self.src_vocab_size, tgt_vocab_size=self.tgt_vocab_size))

    @classmethod
    def paper_base(cls, **changes) -> ModelConfig:
        """The paper's base model (D 512, 8 heads, d_ff 2048, 6 layers) with the source articles' 30000-token
        vocabularies; keyword arguments change any field."""
        return cls(**changes)

    @classmethod
    def paper_big(cls, **changes) -> ModelConfig:
        """The paper's big model: D 1024, 16 heads, d_ff 4096, 6 layers, dropout 0.3."""
        return cls(**{"d_model": 1024, "num_heads": 16, "d_ff": 4096, "dropout": 0.3, **changes})


@dataclass(frozen=True, repr=False)
class GPTConfig(_Options):
    """Sizes of the decoder-only model (notebook 09).

    ``num_kv_heads`` < ``num_heads`` is grouped-query attention (1 = multi-query); None means one K/V
    head per query head. ``positions``: "rope" rotates Q and K inside attention, the others add a table to
    the input (as ``ModelConfig``'s). ``norm_first``: pre-norm, as every current GPT (the paper is post-norm).
    ``share_embeddings``: the output head reuses the token table (GPT-2's tied embeddings). The other
    options are ``ModelConfig``'s; the defaults are notebook 09's GPT.
    """

    vocab_size: int = 50257
    d_model: int = 768
    num_heads: int = 12
    num_kv_heads: int | None = None
    d_ff: int = 3072
    num_layers: int = 12
    max_len: int = 1024
    dropout: float = 0.1
    pad_id: int | None = 0
    positions: str = "rope"
    norm_first: bool = True
    share_embeddings: bool = field(default=False, metadata={OPTION: True})

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_ff", "num_layers", "max_len"):
            check_positive_int(name, getattr(self, name))
        check_heads(self.d_model, self.num_heads, self.num_kv_heads)
        _check_model_options(self, self.vocab_size)

    @property
    def kv_heads(self) -> int:
        """K/V heads actually used (num_kv_heads, or num_heads when it is None)."""
        return self.num_heads if self.num_kv_heads is None else self.num_kv_heads
