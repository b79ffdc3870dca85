// Small DOM builders. Every value goes in as TEXT (text nodes, textContent, attributes): nothing
// from an upstream, an agent or the desk is ever parsed as HTML, so a tool description holding
// "<img onerror=...>" shows as those characters.

type Child = Node | string | number | null | undefined | false;
type Attrs = Record<string, string | number | boolean | undefined | ((ev: Event) => void)>;

function append(node: Node, children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    node.appendChild(typeof c === "object" ? c : document.createTextNode(String(c)));
  }
}

/** `h("td", {class: "mono"}, value)`: an element with attributes, listeners (`on...`) and text. */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) continue;
    if (typeof value === "function") el.addEventListener(name.slice(2), value);
    else if (value === true) el.setAttribute(name, "");
    else el.setAttribute(name, String(value));
  }
  append(el, children);
  return el;
}

const SVG_NS = "http://www.w3.org/2000/svg";

/** An SVG element (the chart is drawn with these; no library, no markup strings). */
export function s(tag: string, attrs: Record<string, string | number> = {}, ...children: Child[]): SVGElement {
  const el = document.createElementNS(SVG_NS, tag) as SVGElement;
  for (const [name, value] of Object.entries(attrs)) el.setAttribute(name, String(value));
  append(el, children);
  return el;
}

/** Replaces the children of `node`. */
export function fill(node: Element, ...children: Child[]): void {
  node.replaceChildren();
  append(node, children);
}

/** The value of a named control inside a form. */
export function field(form: HTMLFormElement, name: string): string {
  const el = form.elements.namedItem(name);
  return el instanceof HTMLInputElement || el instanceof HTMLSelectElement || el instanceof HTMLTextAreaElement ? el.value.trim() : "";
}

/** A labelled control: `<label>Name <input name=...></label>`. */
export function labelled(label: string, control: HTMLElement, hint?: string): HTMLLabelElement {
  return h("label", {}, h("span", { class: "label" }, label), control, hint ? h("small", { class: "hint" }, hint) : null);
}

/** A table from column headers and rows of cells. */
export function table(headers: string[], rows: HTMLTableRowElement[], empty = "Nothing yet."): HTMLElement {
  const body = rows.length > 0 ? rows : [h("tr", {}, h("td", { colspan: headers.length, class: "empty" }, empty))];
  return h("div", { class: "table-wrap" }, h("table", {}, h("thead", {}, h("tr", {}, ...headers.map((t) => h("th", {}, t)))), h("tbody", {}, ...body)));
}

/** A button that asks once more before acting (no window.confirm: it blocks and tests cannot see it). */
export function confirmButton(label: string, confirmLabel: string, act: () => Promise<void>, cls = "danger"): HTMLButtonElement {
  const button = h("button", { type: "button", class: cls }, label);
  let armed = false;
  button.addEventListener("click", async () => {
    if (!armed) {
      armed = true;
      button.textContent = confirmLabel;
      button.classList.add("armed");
      return;
    }
    button.disabled = true;
    try {
      await act();
    } finally {
      button.disabled = false;
    }
  });
  button.addEventListener("blur", () => {
    armed = false;
    button.textContent = label;
    button.classList.remove("armed");
  });
  return button;
}
