"""An XLM-R encoder: post-LayerNorm RoBERTa, exactly as Hugging Face's XLM-R computes it.

Sub-module names spell the keys of a Hugging Face XLM-R checkpoint (``embeddings.LayerNorm``,
``encoder.layer.3.attention.self.query`` …), so weights move between the two with no
converter: only the ``roberta.`` prefix of the masked-LM checkpoint is added or removed
(see ``hub.py``). Attention runs through ``torch.nn.functional.scaled_dot_product_attention``
so a GPU gets the fused kernels (on real tokens only, flash attention's variable-length kernel
over the packed sequences; see ``attention.py``), and the stack can stop after any layer (XLCO
contrasts a middle layer and needs nothing above it).

Example::

    >>> import torch
    >>> from infoxlm import Encoder, EncoderConfig
    >>> enc = Encoder(EncoderConfig.of_size("tiny", vocab_size=100)).eval()
    >>> ids = torch.tensor([[0, 5, 6, 2], [0, 7, 2, 1]])
    >>> out = enc(ids, ids.ne(1))
    >>> len(out.hidden_states), tuple(out.last_hidden_state.shape)
    (3, (2, 4, 64))
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
import torch.utils.checkpoint
from torch import nn

from .attention import SelfAttention
from .config import EncoderConfig
from .fast_paths import FastPaths
from .hub import check_weights_fit, load_weights, read_encoder_config, save_encoder
from .layer_norm import LayerNorm
from .mlm_head import MLMHead, add_into_grad
from .packing import Packing, select_rows

if TYPE_CHECKING:
    from ..tokenizer import Tokenizer


class EncoderOutput:
    """What the encoder returns.

    ``hidden_states[0]`` is the embedding output and ``hidden_states[k]`` the output of layer
    k, as in Hugging Face; the tuple has ``num_layers + 1`` entries, each (B, T, d).

    A packed pass (real tokens only, see ``Packing``) keeps its states as (n, d) and pads a
    state to (B, T, d) only when it is asked for (zeros at the padding); ``token_states(k)``
    hands the real tokens' states without padding anything, whichever way the pass ran.
    """

    def __init__(self, states: list[torch.Tensor], packing: Packing, packed: bool):
        self._states = states  # each (n, d) if packed, else (B, T, d)
        self.packing = packing
        self.packed = packed
        self._padded: dict[int, torch.Tensor] = {}

    def _padded_state(self, k: int) -> torch.Tensor:
        if not self.packed:
            return self._states[k]
        if k not in self._padded:
            self._padded[k] = self.packing.pad(self._states[k])
        return self._padded[k]

    @property
    def hidden_states(self) -> tuple[torch.Tensor, ...]:
        return tuple(self._padded_state(k) for k in range(len(self._states)))

    @property
    def last_hidden_state(self) -> torch.Tensor:
        return self._padded_state(len(self._states) - 1)

    def token_states(self, k: int = -1) -> torch.Tensor:
        """hidden_states[k] at the real tokens only: (n, d), in row-major order."""
        state = self._states[k]
        if self.packed:
            return state
        if self.packing.has_padding:
            return self.packing.pack(state)
        return state.reshape(-1, state.shape[-1])


def xlmr_position_ids(input_ids: torch.Tensor, pad_token_id: int) -> torch.Tensor:
    """XLM-R positions: pad_token_id + 1, + 2, … over non-padding tokens; padding keeps pad_token_id.

    input_ids (B, T) → position ids (B, T). Positions follow the token ids, not the attention
    mask, as in Hugging Face, so a sentence gets the same positions whatever its batch.
    """
    not_pad = input_ids.ne(pad_token_id).int()
    return (torch.cumsum(not_pad, dim=1) * not_pad + pad_token_id).long()


class _LookupInPlaceGrad(torch.autograd.Function):
    """weight[ids], whose gradient is index-added into weight.grad over the rows used only.

    Autograd's embedding backward makes a zero-filled V × d gradient per lookup; this touches
    the looked-up rows of the (one) accumulated gradient instead. ``padding_idx`` rows get no
    gradient, as in ``F.embedding``.
    """

    @staticmethod
    def forward(ctx, ids: torch.Tensor, weight: torch.Tensor, padding_idx: int) -> torch.Tensor:
        ctx.save_for_backward(ids)
        ctx.weight, ctx.padding_idx = weight, padding_idx
        return F.embedding(ids, weight, padding_idx)  # (..., d)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (ids,) = ctx.saved_tensors
        weight = ctx.weight
        ids, grad = ids.reshape(-1), grad.reshape(-1, grad.shape[-1])  # (m,), (m, d)
        pad = ctx.padding_idx

        def make() -> torch.Tensor:
            g = torch.zeros_like(weight).index_add_(0, ids, grad)
            g[pad] = 0.0
            return g

        def add(g: torch.Tensor) -> None:
            # All m rows go in, <pad> positions too, and the <pad> row is put back as it was:
            # selecting the other rows first (nonzero) would make the host wait on a GPU.
            kept = g[pad].clone()
            g.index_add_(0, ids, grad)
            g[pad] = kept

        add_into_grad(weight, make, add)
        return None, None, None


class Embeddings(nn.Module):
    """Word + position + token-type (always type 0) embeddings, then LayerNorm and dropout."""

    def __init__(self, config: EncoderConfig, fast_paths: FastPaths = FastPaths()):
        super().__init__()
        d = config.hidden_size
        self.pad_token_id = config.pad_token_id
        self.word_embeddings = nn.Embedding(config.vocab_size, d, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(
            config.max_position_embeddings, d, padding_idx=config.pad_token_id
        )
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, d)
        self.LayerNorm = LayerNorm(d, eps=config.layer_norm_eps, keep_autocast_dtype=fast_paths.low_precision_residual)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.grad_in_place = fast_paths.word_grad_in_place  # see mlm_head.py

    def forward(self, input_ids: torch.Tensor, position_ids: torch.Tensor | None = None) -> torch.Tensor:
        # input_ids (B, T) → (B, T, d)
        if position_ids is None:
            position_ids = xlmr_position_ids(input_ids, self.pad_token_id)
        weight = self.word_embeddings.weight
        # Unlike the head's product, a lookup runs in the weight's own dtype under autocast too
        # (embedding is not an autocast op), so its fp32 gradient can go straight into .grad.
        if self.grad_in_place and torch.is_grad_enabled() and weight.requires_grad:
            words = _LookupInPlaceGrad.apply(input_ids, weight, self.pad_token_id)
        else:
            words = self.word_embeddings(input_ids)
        x = (
            words
            + self.position_embeddings(position_ids)
            + self.token_type_embeddings.weight[0]  # XLM-R uses a single token type
        )
        return self.dropout(self.LayerNorm(x))


class TransformerLayer(nn.Module):
    """One post-LayerNorm block: x = LN(x + Attn(x)); x = LN(x + FFN(x)).

    With a packing, its states are the real tokens only, (n, d); attention (attention.py)
    runs on them as they are or in the padded layout.
    """

    def __init__(self, config: EncoderConfig, fast_paths: FastPaths = FastPaths()):
        super().__init__()
        d, ff, eps = config.hidden_size, config.intermediate_size, config.layer_norm_eps
        keep = fast_paths.low_precision_residual
        # ModuleDicts only to give the parameters Hugging Face's key names.
        self.attention = nn.ModuleDict(
            {
                "self": SelfAttention(config, fast_paths),
                "output": nn.ModuleDict({"dense": nn.Linear(d, d), "LayerNorm": LayerNorm(d, eps=eps, keep_autocast_dtype=keep)}),
            }
        )
        self.intermediate = nn.ModuleDict({"dense": nn.Linear(d, ff)})
        self.output = nn.ModuleDict({"dense": nn.Linear(ff, d), "LayerNorm": LayerNorm(d, eps=eps, keep_autocast_dtype=keep)})
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(
        self,
        x: torch.Tensor,
        attn_mask: torch.Tensor | None,
        packing: Packing | None = None,
        keep: torch.Tensor | None = None,
    ) -> torch.Tensor:
        # x (B, T, d), or (n, d) the real tokens only when packing is given; attn_mask
        # (B, 1, 1, T) bool, True = may attend, or None for no padding. keep (k,) long: compute
        # the output at these rows of x (flattened to (B·T, d) or (n, d)) only → (k, d).
        context = self.attention.self(x, attn_mask, packing)  # x's shape
        if keep is not None:
            # Every row's keys and values were needed above; everything below is row-wise,
            # so rows nobody reads are dropped before three quarters of the layer's products.
            d = x.shape[-1]
            x, context = select_rows(x.reshape(-1, d), keep), select_rows(context.reshape(-1, d), keep)  # (k, d)
        out = self.attention.output
        x = out.LayerNorm(x + self.dropout(out.dense(context)))
        ffn = self.output.dense(F.gelu(self.intermediate.dense(x)))
        return self.output.LayerNorm(x + self.dropout(ffn))


class LayerStack(nn.Module):
    """The ``encoder.layer.{i}`` list of a Hugging Face checkpoint."""

    def __init__(self, config: EncoderConfig, fast_paths: FastPaths = FastPaths()):
        super().__init__()
        self.layer = nn.ModuleList(TransformerLayer(config, fast_paths) for _ in range(config.num_hidden_layers))


class Encoder(nn.Module):
    """XLM-R body + pooler + tied masked-LM head, loadable from and savable to Hugging Face.

    ``encoder(input_ids, attention_mask)`` runs the body; ``encoder.lm_head(hidden, masked)``
    turns hidden states into vocabulary logits at the masked positions only. ``fast_paths``
    (see fast_paths.py) are chosen here, once, and passed to the parts that run them.

    ``activation_checkpointing`` (``run.activation_checkpointing``): keep only each layer's
    input through a forward pass with gradients and recompute the layer in the backward pass
    (``torch.utils.checkpoint``, non-reentrant, dropout replayed exactly). Activation memory
    falls from every layer's intermediates to one state per layer, for about a third more
    compute; the gradients are the same as without.
    """

    def __init__(
        self, config: EncoderConfig, fast_paths: FastPaths = FastPaths(), *, activation_checkpointing: bool = False
    ):
        super().__init__()
        self.config = config
        self.fast_paths = fast_paths
        self.activation_checkpointing = activation_checkpointing  # chosen here, like fast_paths
        self.embeddings = Embeddings(config, fast_paths)
        self.encoder = LayerStack(config, fast_paths)
        # Carried only so that checkpoints round-trip and AutoModel finds every weight it
        # expects; infoxlm's objectives do not use it.
        self.pooler = nn.ModuleDict({"dense": nn.Linear(config.hidden_size, config.hidden_size)})
        self.lm_head = MLMHead(config, self.embeddings.word_embeddings, fast_paths)
        # Optional parts ("lm_head", "pooler") whose weights came from a checkpoint, not from
        # reset_parameters(); set by from_pretrained, read by save_pretrained.
        self.loaded_parts: set[str] = set()
        self.reset_parameters()

    @property
    def num_layers(self) -> int:
        return self.config.num_hidden_layers

    @torch.no_grad()
    def reset_parameters(self, scheme: str = "normal") -> None:
        """Fresh weights: zero biases, unit LayerNorms, and matrices drawn from

        - ``normal``: N(0, initializer_range²), Hugging Face XLM-R's initialisation;
        - ``uniform``: U[−initializer_range, initializer_range], the paper's from-scratch recipe.
        """
        if scheme not in ("normal", "uniform"):
            raise ValueError(f"initialisation scheme {scheme!r}: expected 'normal' or 'uniform'")
        r = self.config.initializer_range

        def draw(weight: torch.Tensor) -> None:
            weight.normal_(0.0, r) if scheme == "normal" else weight.uniform_(-r, r)

        for module in self.modules():
            if module is self.lm_head.decoder:
                continue  # its weight is the word-embedding matrix, drawn (with a zero <pad> row) below
            if isinstance(module, nn.Linear):
                draw(module.weight)
                if module.bias is not None:
                    module.bias.zero_()
            elif isinstance(module, nn.Embedding):
                draw(module.weight)
                if module.padding_idx is not None:
                    module.weight[module.padding_idx].zero_()
            elif isinstance(module, nn.LayerNorm):
                module.weight.fill_(1.0)
                module.bias.zero_()
        self.lm_head.bias.zero_()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        *,
        position_ids: torch.Tensor | None = None,
        num_layers: int | None = None,
        packing: Packing | None = None,
    ) -> EncoderOutput:
        """Encode a padded batch.

        input_ids (B, T); attention_mask (B, T), 1 = token, 0 = padding (default: tokens that
        are not ``<pad>``); position_ids (B, T), default XLM-R's (see ``xlmr_position_ids``);
        num_layers: stop after this many layers (0 … L, default L) without computing the rest;
        packing: where the real tokens are, made on the host with the batch (the trainer's
        batches carry one), so that the pass never waits on the device to learn it; default:
        computed from the mask, which on a GPU waits for every queued kernel.
        """
        return EncoderOutput(*self._encode(input_ids, attention_mask, position_ids, num_layers, packing, None))

    def states_at(
        self,
        input_ids: torch.Tensor,
        rows: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        *,
        position_ids: torch.Tensor | None = None,
        num_layers: int | None = None,
        packing: Packing | None = None,
    ) -> torch.Tensor:
        """The states after ``num_layers`` layers at chosen real tokens only: (k, d), the same
        as ``forward(...).token_states(num_layers)[rows]``.

        rows (k,) long, distinct: indices among the batch's n real tokens in row-major order
        (the order of ``token_states``). The top layer still needs every token's keys and
        values, but its output projection, feed-forward pair and LayerNorms (three quarters
        of its products) run on the k rows only: a masked-LM loss reads the masked tokens'
        final states, ``<s>`` pooling one token per sentence. Other arguments as ``forward``.
        """
        states, _, _ = self._encode(input_ids, attention_mask, position_ids, num_layers, packing, rows)
        return states[-1]

    def _encode(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None,
        position_ids: torch.Tensor | None,
        num_layers: int | None,
        packing: Packing | None,
        rows: torch.Tensor | None,
    ) -> tuple[list[torch.Tensor], Packing, bool]:
        """The states of a pass (each (n, d) if packed, else (B, T, d)), its packing and whether
        it ran packed; with ``rows`` (see ``states_at``) the last state is (k, d) at those rows."""
        L = self.config.num_hidden_layers
        num_layers = L if num_layers is None else num_layers
        if not 0 <= num_layers <= L:
            raise ValueError(f"num_layers={num_layers}: expected 0 … {L}")
        if packing is None:
            if attention_mask is None:
                attention_mask = input_ids.ne(self.config.pad_token_id)
            packing = Packing.of(attention_mask)
        if not packing.has_padding:
            attn_mask = None  # no mask at all lets SDPA pick its fastest kernel
        else:
            mask = attention_mask.bool() if attention_mask is not None else packing.attention_mask()
            attn_mask = mask[:, None, None, :]  # (B, 1, 1, T)
        packed = self.fast_paths.skip_padding and packing.has_padding
        # The chosen real tokens as rows of a state flattened to (n, d) or (B·T, d).
        keep = None if rows is None else rows if packed or not packing.has_padding else packing.rows[rows]

        # The layers' packing: the real tokens' row count rounded up to the token bucket, if any.
        layout = packing.bucketed(self.fast_paths.token_bucket) if packed and self.fast_paths.token_bucket else packing
        if packed:
            if position_ids is None:
                position_ids = xlmr_position_ids(input_ids, self.config.pad_token_id)
            x = self.embeddings(layout.pack(input_ids), layout.pack(position_ids))  # (n + spare rows, d)
        else:
            x = self.embeddings(input_ids, position_ids)  # (B, T, d)
        rows_in_top_layer = keep is not None and self.fast_paths.top_rows_only and num_layers > 0
        # Recomputing a layer's activations in the backward pass costs one more forward of
        # it and keeps only its input alive in between; pointless where nothing is kept.
        recompute = self.activation_checkpointing and torch.is_grad_enabled()
        states = [x]
        for i, layer in enumerate(self.encoder.layer[:num_layers]):
            top = i == num_layers - 1
            args = (x, attn_mask, layout if packed else None, keep if top and rows_in_top_layer else None)
            x = torch.utils.checkpoint.checkpoint(layer, *args, use_reentrant=False) if recompute else layer(*args)
            states.append(x)
        if keep is not None and not rows_in_top_layer:  # the whole last state was computed: pick
            states[-1] = select_rows(x.reshape(-1, x.shape[-1]), keep)
        if layout.spare_rows:  # only the real tokens' rows leave the encoder (views, no copies)
            n, picked = packing.num_tokens, keep is not None  # a picked last state has its k rows only
            states = [s[:n] for s in states[:-1]] + [states[-1] if picked else states[-1][:n]]
        return states, packing, packed

    def compile_layers(self, backend: str = "inductor") -> None:
        """``torch.compile`` each layer, with dynamic shapes (batches of sentences bring new
        lengths at every step, which must not each cost a compile). Compiling fuses the
        element-wise work around the products, and costs time over the first steps (see
        BENCHMARKS.md, "GPU: one H100, base and large").

        The layers share one ``forward``, which training calls in up to 12 forms, each its own
        graph: 3 grad and autocast states (query encoder, key encoder, the queue's pre-fill)
        × rows kept or not (the top layer) × packed or padded states. torch keeps at most
        ``torch._dynamo.config.recompile_limit`` graphs per function (8 by default) and runs
        the forms past it uncompiled; that limit is process-wide, so whoever decides to
        compile sets it (training: ``train.joint_step.compile_encoders``), not the encoder.
        """
        for layer in self.encoder.layer:
            layer.compile(dynamic=True, backend=backend)

    def set_dropout(self, p: float) -> None:
        """Set hidden and attention dropout everywhere (e.g. 0 for continued pre-training)."""
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout={p}: expected 0 <= p < 1")
        self.config.hidden_dropout_prob = self.config.attention_probs_dropout_prob = p
        for module in self.modules():
            if isinstance(module, nn.Dropout):
                module.p = p
            elif isinstance(module, SelfAttention):
                module.dropout_p = p

    def pooled_output(self, last_hidden_state: torch.Tensor) -> torch.Tensor:
        """Hugging Face's pooler: tanh(W · h_<s>). (B, T, d) → (B, d)."""
        return torch.tanh(self.pooler.dense(last_hidden_state[:, 0]))

    # --- Hugging Face checkpoint directories ------------------------------------------

    @classmethod
    def from_pretrained(
        cls,
        path: str | Path,
        *,
        map_location: str | torch.device = "cpu",
        fast_paths: FastPaths = FastPaths(),
        activation_checkpointing: bool = False,
    ) -> "Encoder":
        """Load a Hugging Face XLM-R checkpoint directory (``config.json`` + weights), into an
        encoder built with ``fast_paths`` and ``activation_checkpointing`` (see the class).

        Reads ``model.safetensors`` (or its sharded index), else ``pytorch_model.bin`` with
        ``weights_only=True``; the MLM head (``lm_head.*``) when present, else a freshly
        initialised one. Raises ``CheckpointError`` for anything that is not XLM-R-shaped.
        """
        config = read_encoder_config(path)
        # The weights' names and shapes are checked against an encoder built on the meta device
        # (no memory) first: a config.json that disagrees with its weights is refused before a
        # model of its size is allocated.
        with torch.device("meta"):
            check_weights_fit(cls(config, fast_paths), path)
        encoder = cls(config, fast_paths, activation_checkpointing=activation_checkpointing)
        load_weights(encoder, path, map_location)
        return encoder

    def with_fast_paths(self, fast_paths: FastPaths) -> "Encoder":
        """A new encoder of the same config, weights (copied), frozen parts, activation
        checkpointing and mode that runs ``fast_paths``."""
        other = type(self)(self.config, fast_paths, activation_checkpointing=self.activation_checkpointing)
        other = other.to(self.embeddings.word_embeddings.weight.device)
        other.load_state_dict(self.state_dict())
        for theirs, ours in zip(self.parameters(), other.parameters()):
            ours.requires_grad_(theirs.requires_grad)
        other.loaded_parts = set(self.loaded_parts)
        other.train(self.training)
        return other

    def save_pretrained(
        self,
        path: str | Path,
        tokenizer: "Tokenizer | None" = None,
        *,
        include_mlm_head: bool = True,
    ) -> Path:
        """Write ``config.json`` + ``model.safetensors`` (+ tokenizer files) that transformers loads as XLM-R."""
        return save_encoder(self, path, tokenizer=tokenizer, include_mlm_head=include_mlm_head)
