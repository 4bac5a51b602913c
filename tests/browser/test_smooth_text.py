"""A streamed answer is revealed a little every frame, not a chunk at a time; with reduced motion,
or when loaded from history, it shows as it arrives.

The page records each text_delta as its bytes arrive (a tee of the SSE response) and each text the
answer's bubble shows (a MutationObserver), both on the page's clock."""

from __future__ import annotations

from dataclasses import dataclass

from playwright.async_api import BrowserContext, Page

from tests.e2e.client import Sim

from .conftest import Shots
from .ui import Spotter, numbered_words, tag

RECORDER = r"""(() => {
  const deltas = (window.__deltas = []);
  const shown = (window.__shown = []);
  const fetch = window.fetch;
  window.fetch = async (...args) => {
    const res = await fetch(...args);
    if (!res.body || !(res.headers.get("content-type") ?? "").startsWith("text/event-stream")) return res;
    const [mine, theirs] = res.body.tee();
    (async () => {
      const reader = mine.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        const at = performance.now();
        buffer += value.replace(/\r\n?/g, "\n");
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const lines = buffer.slice(0, end).split("\n");
          buffer = buffer.slice(end + 2);
          const kind = lines.find((l) => l.startsWith("event:"))?.slice(6).trim();
          const data = lines.filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, "")).join("\n");
          if (!data) continue;
          const event = JSON.parse(data);
          if ((event.type ?? kind) === "text_delta") deltas.push({ at, text: event.delta });
        }
      }
    })().catch(() => {});
    return new Response(theirs, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
  new MutationObserver(() => {
    const bubbles = document.querySelectorAll(".agent-msg.assistant");
    const text = bubbles.length ? bubbles[bubbles.length - 1].textContent : "";
    if (!text || text === shown[shown.length - 1]?.text) return;
    shown.push({ at: performance.now(), text, splitsPair: /[\uD800-\uDBFF]$/.test(text) });
  }).observe(document, { subtree: true, childList: true, characterData: true });
})();"""


@dataclass
class Recording:
    deltas: list[dict]  # {at, text}: as received
    shown: list[dict]  # {at, text, splitsPair}: each distinct text the bubble showed

    @property
    def ends(self) -> set[int]:
        """The answer's length after each delta: where a chunk-at-a-time display can stop."""
        total, ends = 0, set()
        for d in self.deltas:
            total += len(d["text"])
            ends.add(total)
        return ends

    def received_by(self, at: float) -> int:
        return sum(len(d["text"]) for d in self.deltas if d["at"] <= at)


async def recorded(page: Page) -> Recording:
    return Recording(**await page.evaluate("({ deltas: window.__deltas, shown: window.__shown })"))


def answer_of(prefix: str, n: int) -> str:
    # Emoji (surrogate pairs) and Hebrew among the words: a reveal must never cut inside a pair.
    words = numbered_words(prefix, n)
    return " ".join(f"{w} 💪" if i % 3 == 0 else f"{w} שלום" if i % 3 == 1 else w for i, w in enumerate(words))


async def stream(page: Page, sim: Sim, prefix: str, shots: Shots | None = None) -> tuple[str, Recording]:
    """Ask for a ~2 s answer in ~10 chunks a second of 1-3 words (the simulator's chunks at 50
    tokens/s), let it finish, and return it with what the page recorded."""
    spotter = Spotter(page)
    await spotter.open()
    answer, ask = answer_of(prefix, 30), f"{prefix} please {tag()}"
    await sim.script(ask, {"text": answer, "tool_uses": []})
    await sim.latency(ttft_ms=200, tokens_per_second=50)
    try:
        await page.evaluate("window.__deltas.length = 0; window.__shown.length = 0")
        await spotter.send(ask)
        if shots:
            await spotter.says(f"{prefix}12")
            await shots.take(page, "streaming")
        await spotter.idle()
    finally:
        await sim.latency(ttft_ms=0, tokens_per_second=0)
    return answer, await recorded(page)


def assert_shown_as_received(answer: str, rec: Recording) -> None:
    """Only prefixes of the answer, growing, never ahead of what had arrived, ending with all of it."""
    assert "".join(d["text"] for d in rec.deltas) == answer
    assert not [s["text"] for s in rec.shown if s["splitsPair"]], "a surrogate pair was cut"
    texts = [s["text"] for s in rec.shown]
    assert all(answer.startswith(t) for t in texts), [t for t in texts if not answer.startswith(t)][:3]
    assert [len(t) for t in texts] == sorted({len(t) for t in texts}), "the shown text went back"
    assert all(len(s["text"]) <= rec.received_by(s["at"]) for s in rec.shown), "text shown before it arrived"
    assert texts[-1] == answer


async def recording(context: BrowserContext, page: Page) -> Page:
    """The signed-in page again, with the recorder in place before the app's first script."""
    await context.add_init_script(RECORDER)
    await page.reload()
    return page


async def test_a_streamed_answer_is_revealed_frame_by_frame(owner_page: Page, context: BrowserContext, sim: Sim, shots: Shots) -> None:
    page = await recording(context, owner_page)
    answer, rec = await stream(page, sim, "smooth", shots)
    assert_shown_as_received(answer, rec)
    assert len(rec.deltas) >= 10
    between = [s for s in rec.shown if len(s["text"]) not in rec.ends]
    assert len(rec.shown) > len(rec.deltas) and between, (
        f"{len(rec.shown)} steps for {len(rec.deltas)} deltas, {len(between)} between chunk ends")
    await shots.take(page, "answered")

    # Loaded from history (a reload starts a fresh recording), the same answer shows whole at once.
    await page.reload()
    spotter = Spotter(page)
    if not await spotter.composer.is_visible():
        await spotter.open()
    await spotter.says(answer.split()[-1])
    assert [s["text"] for s in (await recorded(page)).shown] == [answer]


async def test_with_reduced_motion_each_chunk_shows_as_it_arrives(owner_page: Page, context: BrowserContext, sim: Sim, shots: Shots) -> None:
    page = await recording(context, owner_page)
    await page.emulate_media(reduced_motion="reduce")
    answer, rec = await stream(page, sim, "still")
    assert_shown_as_received(answer, rec)
    stops = [len(s["text"]) for s in rec.shown]
    assert set(stops) <= rec.ends, f"stopped between chunk ends: {sorted(set(stops) - rec.ends)[:5]}"
    # The app applies the deltas of one animation frame together: only chunks that came within a
    # frame of the one before may share a step.
    close = sum(1 for a, b in zip(rec.deltas, rec.deltas[1:]) if b["at"] - a["at"] < 34)
    assert len(stops) >= len(rec.deltas) - close, f"{len(stops)} steps for {len(rec.deltas)} deltas ({close} close together)"
    await shots.take(page, "answered")
