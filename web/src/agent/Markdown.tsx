// A small, safe subset of Markdown for the assistant's text: paragraphs, bullet and numbered
// lists, **bold**, *italic* and `code`. Everything becomes React text nodes; nothing is parsed as HTML.
import type { ReactNode } from "react";

const INLINE = /(\*\*[^*]+\*\*|`[^`]+`|\*[^*\s][^*]*\*)/g;

function inline(text: string, key: string): ReactNode[] {
  return text.split(INLINE).filter(Boolean).map((part, i) => {
    const k = `${key}-${i}`;
    if (part.startsWith("**") && part.endsWith("**") && part.length > 4) return <strong key={k}>{part.slice(2, -2)}</strong>;
    if (part.startsWith("`") && part.endsWith("`") && part.length > 2) return <code key={k}>{part.slice(1, -1)}</code>;
    if (part.startsWith("*") && part.endsWith("*") && part.length > 2) return <em key={k}>{part.slice(1, -1)}</em>;
    return part;
  });
}

function withBreaks(lines: string[], key: string): ReactNode[] {
  return lines.flatMap((line, i) => (i ? [<br key={`${key}-br${i}`} />, ...inline(line, `${key}-${i}`)] : inline(line, `${key}-${i}`)));
}

const BULLET = /^\s*[-*•]\s+/;
const NUMBERED = /^\s*\d+[.)]\s+/;

export function Markdown({ text }: { text: string }) {
  const blocks: ReactNode[] = [];
  const lines = text.replace(/\r\n?/g, "\n").split("\n");
  let para: string[] = [];
  let list: { ordered: boolean; items: string[] } | null = null;
  const endPara = () => {
    if (para.length) blocks.push(<p key={`p${blocks.length}`}>{withBreaks(para, `p${blocks.length}`)}</p>);
    para = [];
  };
  const endList = () => {
    if (!list) return;
    const key = `l${blocks.length}`;
    const items = list.items.map((item, i) => <li key={`${key}-${i}`}>{inline(item, `${key}-${i}`)}</li>);
    blocks.push(list.ordered ? <ol key={key}>{items}</ol> : <ul key={key}>{items}</ul>);
    list = null;
  };
  for (const line of lines) {
    const bullet = BULLET.test(line);
    const numbered = !bullet && NUMBERED.test(line);
    if (bullet || numbered) {
      endPara();
      if (list && list.ordered !== numbered) endList();
      list ??= { ordered: numbered, items: [] };
      list.items.push(line.replace(bullet ? BULLET : NUMBERED, ""));
    } else if (!line.trim()) {
      endPara();
      endList();
    } else if (list && /^\s{2,}/.test(line)) {
      list.items[list.items.length - 1] += ` ${line.trim()}`;
    } else {
      endList();
      para.push(line.replace(/^#{1,6}\s+/, ""));
    }
  }
  endPara();
  endList();
  return <div className="agent-md">{blocks}</div>;
}
