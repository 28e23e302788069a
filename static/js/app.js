// GAMUT review: keyboard shortcuts, photo zoom, seconds spent, upload progress.
// No inline scripts anywhere (the CSP forbids them): every page behaviour lives here.
(function () {
  "use strict";

  // Submit through htmx even when the form arrived in a swap that htmx has not finished
  // processing yet (it settles new content a moment later): htmx.process is idempotent.
  function send(form, submitter) {
    if (window.htmx) window.htmx.process(form);
    // A click, not requestSubmit(submitter): htmx takes the button's name and value from the
    // button it saw clicked.
    if (submitter) submitter.click();
    else form.requestSubmit();
  }

  function panel() {
    return document.querySelector("[data-shortcuts]");
  }

  function typing(target) {
    return target && (target.tagName === "TEXTAREA" ||
      (target.tagName === "INPUT" && !["radio", "checkbox", "hidden"].includes(target.type)));
  }

  function showRevision(form, show) {
    const box = form.querySelector("[data-revision-box]");
    if (!box) return;
    const area = box.querySelector("textarea");
    box.hidden = !show;
    // A disabled box is not sent: accept and discard must not carry the prefilled text.
    area.disabled = !show;
    if (show) {
      area.focus();
      area.setSelectionRange(area.value.length, area.value.length);
    }
  }

  function choose(form, value) {
    const radio = form.querySelector('input[name="decision"][value="' + value + '"]');
    if (!radio) return false;
    radio.checked = true;
    showRevision(form, value === "revise");
    return true;
  }

  function submit(form) {
    if (!form.querySelector('input[name="decision"]:checked')) {
      flash(form, "Choose a decision first: a, r or d.");
      return;
    }
    send(form);
  }

  function flash(form, text) {
    let p = form.querySelector(".client-error");
    if (!p) {
      p = document.createElement("p");
      p.className = "error client-error";
      p.setAttribute("role", "alert");
      form.prepend(p);
    }
    p.textContent = text;
  }

  function toggleZoom(img) {
    if (img) openZoom(img);
  }

  // --- the photo, zoomed: fills the screen, wheel or +/- zoom, drag or arrows pan, 0 fits,
  // Esc (or z, or a click without a drag) closes and gives the focus back -----------------
  const zoom = { overlay: null, img: null, scale: 1, x: 0, y: 0, back: null, drag: null };

  function zoomApply() {
    zoom.img.style.transform =
      "translate(" + zoom.x + "px, " + zoom.y + "px) scale(" + zoom.scale + ")";
    zoom.overlay.dataset.scale = zoom.scale.toFixed(2);
  }

  function zoomBy(factor, cx, cy) {
    const next = Math.min(8, Math.max(1, zoom.scale * factor));
    // keep the point under the pointer (or the centre) where it is
    const rect = zoom.overlay.getBoundingClientRect();
    const px = (cx === undefined ? rect.width / 2 : cx) - rect.width / 2;
    const py = (cy === undefined ? rect.height / 2 : cy) - rect.height / 2;
    zoom.x = px - (px - zoom.x) * (next / zoom.scale);
    zoom.y = py - (py - zoom.y) * (next / zoom.scale);
    zoom.scale = next;
    if (next === 1) { zoom.x = 0; zoom.y = 0; }
    zoomApply();
  }

  function closeZoom() {
    if (!zoom.overlay || zoom.overlay.hidden) return;
    zoom.overlay.hidden = true;
    if (zoom.back) zoom.back.focus({ preventScroll: true });
  }

  function openZoom(img) {
    if (!zoom.overlay) {
      const overlay = document.createElement("div");
      overlay.className = "zoom-overlay";
      overlay.id = "photo-zoom";
      overlay.setAttribute("role", "dialog");
      overlay.setAttribute("aria-modal", "true");
      overlay.setAttribute("aria-label", "The photo, zoomed");
      overlay.tabIndex = -1;
      const big = document.createElement("img");
      big.draggable = false;
      const hint = document.createElement("p");
      hint.className = "zoom-hint";
      hint.textContent = "Wheel or + / − zoom · drag or arrows move · 0 fits · Esc closes";
      overlay.append(big, hint);
      document.body.append(overlay);
      zoom.overlay = overlay;
      zoom.img = big;
      overlay.addEventListener("wheel", function (event) {
        event.preventDefault();
        zoomBy(event.deltaY < 0 ? 1.25 : 0.8, event.clientX, event.clientY);
      }, { passive: false });
      overlay.addEventListener("pointerdown", function (event) {
        zoom.drag = { x: event.clientX, y: event.clientY, moved: false };
        overlay.setPointerCapture(event.pointerId);
      });
      overlay.addEventListener("pointermove", function (event) {
        if (!zoom.drag) return;
        const dx = event.clientX - zoom.drag.x, dy = event.clientY - zoom.drag.y;
        if (Math.abs(dx) + Math.abs(dy) > 3) zoom.drag.moved = true;
        if (zoom.drag.moved && zoom.scale > 1) {
          zoom.x += dx; zoom.y += dy;
          zoom.drag.x = event.clientX; zoom.drag.y = event.clientY;
          zoomApply();
        }
      });
      overlay.addEventListener("pointerup", function () {
        const moved = zoom.drag && zoom.drag.moved;
        zoom.drag = null;
        if (!moved) closeZoom();
      });
      // Before the page's own shortcuts: while the photo is open its keys are the only ones.
      document.addEventListener("keydown", function (event) {
        if (!zoom.overlay || zoom.overlay.hidden) return;
        const step = 60, key = event.key;
        const moves = { ArrowLeft: [step, 0], ArrowRight: [-step, 0], ArrowUp: [0, step],
                        ArrowDown: [0, -step] };
        if (key === "Escape" || key === "z") closeZoom();
        else if (key === "+" || key === "=") zoomBy(1.25);
        else if (key === "-" || key === "_") zoomBy(0.8);
        else if (key === "0") { zoom.scale = 1; zoom.x = 0; zoom.y = 0; zoomApply(); }
        else if (moves[key]) { zoom.x += moves[key][0]; zoom.y += moves[key][1]; zoomApply(); }
        else if (key !== "Tab") {
          event.stopImmediatePropagation(); // no page shortcut under the photo
          return;
        }
        event.preventDefault();
        event.stopImmediatePropagation();
      }, true);
    }
    zoom.back = document.activeElement;
    zoom.img.src = img.currentSrc || img.src;
    zoom.img.alt = img.alt;
    zoom.scale = 1; zoom.x = 0; zoom.y = 0;
    zoomApply();
    zoom.overlay.hidden = false;
    zoom.overlay.focus();
  }

  // --- the rubric workspace: move between checks, edit, re-tier, delete, move, add ---------
  let focusedCheck = null; // data-check of the check that had the focus, kept across swaps

  function checks() {
    return Array.from(document.querySelectorAll("#checklist li.check"));
  }

  function currentCheck() {
    const active = document.activeElement && document.activeElement.closest("li.check");
    return active || checks().find((c) => c.dataset.check === focusedCheck) || null;
  }

  function focusCheck(check) {
    if (!check) return;
    check.focus();
    check.scrollIntoView({block: "nearest"});
    focusedCheck = check.dataset.check;
  }

  function workspaceKey(event) {
    const key = event.key;
    const target = event.target;
    if (typing(target)) {
      const form = target.form;
      if (key === "Escape") {
        if (form && form.classList.contains("edit-text")) form.hidden = true;
        focusCheck(target.closest("li.check"));
      } else if (key === "Enter" && !event.shiftKey && target.tagName === "TEXTAREA" && form) {
        event.preventDefault();
        send(form);
      }
      return;
    }
    const list = checks();
    const check = currentCheck();
    const index = check ? list.indexOf(check) : -1;
    if (key === "j" || key === "ArrowDown") {
      event.preventDefault();
      focusCheck(list[Math.min(index + 1, list.length - 1)]);
    } else if (key === "k" || key === "ArrowUp") {
      event.preventDefault();
      focusCheck(list[Math.max(index - 1, 0)]);
    } else if (key === "a") {
      event.preventDefault();
      const add = document.getElementById("add-check");
      if (add) {
        add.querySelector('input[name="after"]').value = "";
        add.querySelector("textarea").focus();
      }
    } else if (!check) {
      return;
    } else if (key === "e" || key === "Enter") {
      event.preventDefault();
      const form = check.querySelector("form.edit-text");
      if (form) {
        form.hidden = false;
        const area = form.querySelector("textarea");
        area.focus();
        area.setSelectionRange(area.value.length, area.value.length);
      }
    } else if (key === "1" || key === "2" || key === "3") {
      const button = check.querySelector('[data-tier-key="' + key + '"]');
      if (button && !button.disabled) {
        event.preventDefault();
        focusedCheck = check.dataset.check;
        send(button.form, button);
      }
    } else if (key === "x" || key === "Delete") {
      event.preventDefault();
      focusedCheck = check.dataset.check;
      const reason = check.querySelector('form.delete input[name="reason"]');
      if (reason) reason.focus();
    } else if (key === "[" || key === "]") {
      const button = check.querySelector('[data-move="' + (key === "[" ? "up" : "down") + '"]');
      if (button) {
        event.preventDefault();
        focusedCheck = check.dataset.check;
        send(button.form, button);
      }
    }
  }

  // While a save is in flight, focus moves that the swap itself causes must not change which
  // check the person is on.
  let saving = false;

  document.addEventListener("focusin", function (event) {
    const check = event.target.closest && event.target.closest("#checklist li.check");
    if (check && !saving) focusedCheck = check.dataset.check;
  });

  document.addEventListener("htmx:beforeRequest", function () {
    if (document.getElementById("checklist")) saving = true;
  });

  function restoreFocus() {
    // Someone typing elsewhere (the add form, a reason) keeps their place: only a focus that
    // the swap took away comes back.
    if (typing(document.activeElement) && document.activeElement.isConnected) return;
    const again = checks().find((c) => c.dataset.check === focusedCheck);
    if (again) focusCheck(again);
  }

  // An edit is answered with only what changed, so most forms on the page still hold the
  // revision they were drawn with: every save sends the page's current one (swapped in out of
  // band with each answer), which is what the page shows.
  document.addEventListener("htmx:configRequest", function (event) {
    const current = document.getElementById("checklist-revision");
    if (current && event.detail.parameters.revision !== undefined &&
        event.detail.elt.closest && event.detail.elt.closest("#checklist")) {
      event.detail.parameters.revision = current.dataset.revision;
    }
  });

  // After a save, the check is new HTML (and a refused save redraws the whole checklist): give
  // the focus back to the same check once htmx has settled it (htmx moves the focus itself
  // while swapping).
  // htmx:load fires on the new content itself, attached to the page (the swap events of an
  // outerHTML swap fire on the element that was replaced, which no longer reaches document).
  document.addEventListener("htmx:load", function (event) {
    if (event.target.closest && event.target.closest("#checklist")) restoreFocus();
  });
  document.addEventListener("htmx:afterSettle", function () {
    if (document.getElementById("checklist")) restoreFocus();
  });
  document.addEventListener("htmx:afterRequest", function () {
    if (!saving) return;
    // Once the swap and the settle that follow this request are done (htmx settles after
    // 20 ms): the same check again, and focus moves count as the person's own from then on.
    setTimeout(function () {
      if (document.activeElement === document.body) restoreFocus();
      saving = false;
    }, 60);
  });

  document.addEventListener("click", function (event) {
    const cancel = event.target.closest("[data-cancel]");
    if (cancel) {
      cancel.form.hidden = true;
      focusCheck(cancel.closest("li.check"));
    }
    const text = event.target.closest("#checklist .check-text");
    if (text) {
      const form = text.closest("li.check").querySelector("form.edit-text");
      if (form) {
        form.hidden = false;
        form.querySelector("textarea").focus();
      }
    }
  });

  document.addEventListener("keydown", function (event) {
    const root = panel();
    if (!root || event.ctrlKey || event.metaKey || event.altKey) return;
    const dialog = document.getElementById("keys-help");
    if (dialog && dialog.open) return; // the dialog closes itself on Esc
    if (root.dataset.shortcuts === "workspace") {
      if (event.key === "?" && !typing(event.target)) {
        event.preventDefault();
        if (dialog) dialog.showModal();
        return;
      }
      workspaceKey(event);
      return;
    }
    const form = root.querySelector("form");
    const key = event.key;
    if (typing(event.target)) {
      if (event.target.tagName === "TEXTAREA" && key === "Enter" && !event.shiftKey && form) {
        event.preventDefault();
        submit(form);
      } else if (key === "Escape") {
        event.target.blur();
      }
      return;
    }
    if (key === "?") {
      event.preventDefault();
      if (dialog) dialog.showModal();
      return;
    }
    if (key === "z") {
      toggleZoom(root.querySelector("img[data-zoom]"));
      return;
    }
    if (!form) return;
    if (key === "a" || key === "d") {
      event.preventDefault();
      choose(form, key === "a" ? "accept" : "discard");
    } else if (key === "r") {
      event.preventDefault();
      choose(form, "revise");
    } else if (key === "Enter") {
      event.preventDefault();
      submit(form);
    } else if (/^[1-9]$/.test(key)) {
      const target = form.querySelector('[data-key="' + key + '"]');
      if (!target) return;
      event.preventDefault();
      if (target.type === "checkbox") target.checked = !target.checked;
      else target.click();
    }
  });

  document.addEventListener("change", function (event) {
    if (event.target.name === "decision") {
      showRevision(event.target.form, event.target.value === "revise");
    }
  });

  document.addEventListener("click", function (event) {
    const zoom = event.target.closest("img[data-zoom]");
    if (zoom) toggleZoom(zoom);
    const keys = event.target.closest("[data-show-keys]");
    if (keys) document.getElementById("keys-help")?.showModal();
    const use = event.target.closest("[data-use-revision]");
    if (use) {
      const form = use.closest("form");
      choose(form, "revise");
      form.querySelector('textarea[name="revised_text"]').value = use.dataset.useRevision;
    }
  });

  // Seconds spent on this candidate: from the moment the panel was shown to the submission.
  document.addEventListener("submit", function (event) {
    const root = event.target.closest("[data-shown-at]");
    const field = event.target.querySelector('input[name="seconds"]');
    if (root && field) {
      const shown = parseInt(root.dataset.shownAt, 10) * 1000;
      field.value = String(Math.max(0, Math.round((Date.now() - shown) / 1000)));
    }
  }, true);

  // On load and after htmx swaps in the next candidate: start the clock at the browser's own
  // time, and hide the revision box unless the decision is revise.
  function prepare() {
    const root = panel();
    if (!root) return;
    root.dataset.shownAt = String(Math.floor(Date.now() / 1000));
    const form = root.querySelector("form");
    const box = form && form.querySelector("[data-revision-box]");
    if (box) {
      const checked = form.querySelector('input[name="decision"]:checked');
      const revising = Boolean(checked && checked.value === "revise");
      box.hidden = !revising;
      box.querySelector("textarea").disabled = !revising;
    }
  }
  document.addEventListener("htmx:load", function (event) {
    if (event.target.matches && event.target.matches("[data-shortcuts]")) prepare();
  });
  document.addEventListener("DOMContentLoaded", prepare);

  // Upload progress on the import page: the bytes sent, then (an indeterminate bar) the
  // server checking and importing; reset when the answer comes, whatever it is.
  function uploadPhase(text, value) {
    const bar = document.getElementById("upload-progress");
    const phase = document.getElementById("upload-phase");
    if (!bar || !phase) return;
    phase.textContent = text;
    if (value === null) { bar.hidden = true; bar.value = 0; return; }
    bar.hidden = false;
    if (value === undefined) bar.removeAttribute("value");
    else bar.value = value;
  }
  document.addEventListener("htmx:xhr:progress", function (event) {
    if (!document.getElementById("upload-progress") || !event.detail.lengthComputable) return;
    const percent = Math.round((event.detail.loaded / event.detail.total) * 100);
    if (percent < 100) uploadPhase("Uploading… " + percent + "%", percent);
    else uploadPhase("Uploaded; the server is checking every line and importing…", undefined);
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    if (!event.target.matches || !event.target.matches("#import-form")) return;
    const xhr = event.detail.xhr;
    if (event.detail.successful || (xhr && xhr.status === 400)) uploadPhase("", null);
    else if (xhr && xhr.status) {
      uploadPhase("The server failed (" + xhr.status + "). Reload the page: Recent imports " +
                  "shows whether it was imported; if not, try again.", null);
    } else {
      uploadPhase("The connection was lost before the answer came. Reload the page: Recent " +
                  "imports shows whether it was imported.", null);
    }
  });
})();
