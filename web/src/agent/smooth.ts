// Streamed text revealed a little every frame: the orchestrator sends ~10 chunks a second, and
// showing each whole would read as jumps of a few words rather than as typing.
import { useEffect, useRef, useState } from "react";

/** How long the reveal takes to reach the end of a chunk that just arrived. A little over the
 * orchestrator's 100 ms coalescing window, so at a steady pace the next chunk lands before the
 * reveal has stopped. */
const CATCH_UP_MS = 120;

const reducedMotion = typeof matchMedia === "function" ? matchMedia("(prefers-reduced-motion: reduce)") : null;

/** `n` moved forward off the middle of a surrogate pair: an emoji is shown whole or not at all. */
function boundary(text: string, n: number): number {
  const code = text.charCodeAt(n - 1);
  return code >= 0xd800 && code <= 0xdbff && n < text.length ? n + 1 : Math.min(n, text.length);
}

/** The part of `text` to show. While `streaming`, a prefix that moves at an even pace from what
 * is shown to the received end, CATCH_UP_MS after each arrival; otherwise (finished, loaded from
 * history, reduced motion) all of it. Never text that has not arrived; never shorter than before. */
export function useSmoothText(text: string, streaming: boolean): string {
  const smooth = streaming && !reducedMotion?.matches;
  const [shown, setShown] = useState(smooth ? 0 : text.length);
  // Each arrival starts a straight run from the length shown then to the new end.
  const run = useRef({ from: 0, at: 0 });
  useEffect(() => {
    run.current = { from: shown, at: performance.now() };
    // Only an arrival starts a run (not every frame's step): `shown` is read, not depended on.
  }, [text]);
  useEffect(() => {
    if (!smooth) {
      setShown(text.length); // so a stream that becomes smooth again goes on from here, not back
      return;
    }
    if (shown >= text.length) return;
    const frame = requestAnimationFrame((now) => {
      const { from, at } = run.current;
      const progress = Math.min(Math.max((now - at) / CATCH_UP_MS, 0), 1);
      setShown(boundary(text, Math.max(shown + 1, Math.round(from + (text.length - from) * progress))));
    });
    return () => cancelAnimationFrame(frame);
  }, [text, shown, smooth]);
  return smooth ? text.slice(0, shown) : text;
}
