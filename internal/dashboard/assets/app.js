// sendonce dashboard: progressive enhancements only. Every page works
// without this file; it adds live lists, copy buttons and the live
// template preview. No inline script anywhere (the CSP forbids it).
"use strict";

// Live lists: <tbody data-live="url"> receives rows over server-sent
// events; each replaces the row with its id or goes on top.
function liveList(tbody) {
  const es = new EventSource(tbody.dataset.live);
  es.addEventListener("row", (ev) => {
    const row = JSON.parse(ev.data);
    const t = document.createElement("template");
    t.innerHTML = row.html;
    const tr = t.content.firstElementChild;
    if (!tr) return;
    const old = document.getElementById(tr.id);
    if (old) {
      if (old.outerHTML !== tr.outerHTML) old.replaceWith(tr);
    } else {
      tbody.prepend(tr);
    }
    document.querySelectorAll(".empty").forEach((e) => { e.hidden = true; });
  });
}

// Copy buttons: <button data-copy="input-id">. The selection copy works
// without a clipboard permission; the Clipboard API is the modern path.
function copyButton(btn) {
  btn.addEventListener("click", () => {
    const input = document.getElementById(btn.dataset.copy);
    const done = () => { btn.textContent = "Copied"; };
    input.select();
    let copied = false;
    try { copied = document.execCommand("copy"); } catch { copied = false; }
    if (copied) done();
    if (navigator.clipboard) navigator.clipboard.writeText(input.value).then(done, () => {});
  });
}

// Live template preview: the form's fields are rendered by the server
// (the same renderer sends use) a moment after each keystroke.
function livePreview(form) {
  let timer = 0;
  const q = (sel) => document.querySelector(sel);
  const run = async () => {
    const body = new URLSearchParams(new FormData(form));
    const res = await fetch(form.dataset.preview, { method: "POST", body, credentials: "same-origin" });
    if (!res.ok) return;
    const p = await res.json();
    q("[data-preview-subject]").textContent = p.subject || "";
    q("[data-preview-text]").textContent = p.text || "";
    q("[data-preview-html]").srcdoc = p.html || "";
    const err = q("[data-preview-error]");
    err.textContent = p.error || "";
    err.hidden = !p.error;
  };
  form.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(run, 250);
  });
}

document.querySelectorAll("tbody[data-live]").forEach(liveList);
document.querySelectorAll("button[data-copy]").forEach(copyButton);
document.querySelectorAll("form[data-preview]").forEach(livePreview);
