// Small DOM helpers: h() builds elements, never from HTML strings, so
// every text from the API is shown as text.

export function h(tag, attrs = {}, ...children) {
  if (attrs === null || typeof attrs !== 'object' || attrs instanceof Node || Array.isArray(attrs)) {
    children.unshift(attrs); // h('p', 'text'): no attributes
    attrs = {};
  }
  const [name, ...classes] = tag.split('.');
  const el = document.createElement(name || 'div');
  if (classes.length) el.className = classes.join(' ');
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'value' || (k in el && typeof v !== 'string')) el[k] = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
}

// fill replaces an element's children.
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// errorBox shows an error as a message: its code and text.
export function errorBox(err) {
  const code = err && err.code ? `${err.code}: ` : '';
  const hint = err && err.code === 'unauthenticated' ? ' (enter an API key under Settings)' : '';
  return h('p.error', { role: 'alert' }, code + ((err && err.message) || String(err)) + hint);
}

export const ms = (n) => (n >= 1000 ? `${(n / 1000).toFixed(2)} s` : `${n} ms`);

// busy disables a button while fn runs.
export async function busy(button, fn) {
  button.disabled = true;
  try { return await fn(); } finally { button.disabled = false; }
}
