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

  // The panel's decision form (the undo and skip forms sit beside it).
  function mainForm(root) {
    return root.querySelector("#review-form, #adjudicate-form") || root.querySelector("form");
  }

  function typing(target) {
    return target && (target.tagName === "TEXTAREA" ||
      (target.tagName === "INPUT" && !["radio", "checkbox", "hidden"].includes(target.type)));
  }

  // focus: false on the adjudication page when revisions are on offer, so that 1 and 2 pick one
  // instead of being typed into the box.
  function showRevision(form, show, focus) {
    const box = form.querySelector("[data-revision-box]");
    if (!box) return;
    const area = box.querySelector("textarea");
    box.hidden = !show;
    // A disabled box is not sent: accept and discard must not carry the prefilled text.
    area.disabled = !show;
    if (show && focus !== false) focusArea(area);
  }

  function focusArea(area) {
    area.focus();
    area.setSelectionRange(area.value.length, area.value.length);
  }

  function choose(form, value, focus) {
    const radio = form.querySelector('input[name="decision"][value="' + value + '"]');
    if (!radio) return false;
    radio.checked = true;
    showRevision(form, value === "revise", focus);
    return true;
  }

  // The forms whose request is on its way. Not htmx's "htmx-request" class: until htmx settles
  // a swap (20 ms, longer on a busy machine) the new form with the same id wears the attributes
  // of the one it replaced, class included, and an Enter in that moment was dropped unsent.
  const sending = new WeakSet();
  document.addEventListener("htmx:beforeRequest", function (event) {
    sending.add(event.detail.elt);
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    sending.delete(sender(event));
  });

  function submit(form) {
    // Enter pressed again while the first submission is on its way: the form is already sent.
    if (sending.has(form)) return;
    if (!form.querySelector('input[name="decision"]:checked')) {
      flash(form, "Choose a decision first: a, r or d.");
      return;
    }
    send(form);
  }

  // Buttons, selects and links do what they do natively on Enter and Space: no page shortcut
  // takes those keys from them.
  function pressable(target) {
    return target && (target.tagName === "BUTTON" || target.tagName === "SELECT" ||
      target.tagName === "A" || target.tagName === "SUMMARY");
  }

  function singleKeysOff() {
    const root = panel();
    return Boolean(root && root.dataset.singleKeys === "off");
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

  // A button, select or field keeps every key: Enter and Space press a button, arrows change a
  // select, letters are typed. Only Esc (leave) and Enter in a textarea (save) are the page's.
  function ownKeys(target) {
    return target && ["BUTTON", "SELECT", "INPUT", "TEXTAREA", "A", "SUMMARY"]
      .includes(target.tagName);
  }

  // The confirmation of a proposed entity: y confirms, c opens the correction box (Enter in it
  // saves, natively: the box is its form's only field), s skips.
  function entityKey(event, root, dialog, target) {
    const key = event.key;
    if (typing(target)) {
      if (key === "Escape") target.blur();
      return;
    }
    if (pressable(target) && (key === "Enter" || key === " ")) return;
    if (key.length === 1 && singleKeysOff()) return;
    if (key === "?") {
      event.preventDefault();
      if (dialog) dialog.showModal();
    } else if (key === "z") {
      toggleZoom(root.querySelector("img[data-zoom]"));
    } else if (key === "c") {
      if (!root.querySelector("[data-correct-form]")) return;
      event.preventDefault();
      openCorrection(root);
    } else if (key === "y" || key === "s") {
      const action = root.querySelector('[data-action-key="' + key + '"]');
      if (!action || action.disabled || sending.has(action.form)) return;
      event.preventDefault();
      send(action.form, action);
    }
  }

  // The correction box, opened by c or by its visible Correct button.
  function openCorrection(root) {
    const form = root.querySelector("[data-correct-form]");
    if (!form) return;
    // Marked, so that the new panel's preparation (htmx:load, which a busy machine delays
    // past the first keys pressed on it) leaves the box open.
    form.dataset.opened = "true";
    form.hidden = false;
    const opener = root.querySelector("[data-open-correct]");
    if (opener) opener.hidden = true;
    const box = form.querySelector("input[name='entity']");
    box.focus();
    box.select();
  }

  document.addEventListener("click", function (event) {
    const opener = event.target.closest && event.target.closest("[data-open-correct]");
    if (opener) openCorrection(opener.closest("[data-shortcuts]"));
  });

  function workspaceKey(event, target) {
    const key = event.key;
    if (ownKeys(target)) {
      const form = target.form;
      if (key === "Escape") {
        const editor = target.closest(".edit-text");
        if (editor) editor.hidden = true;
        if (target.closest("li.check")) focusCheck(target.closest("li.check"));
        else target.blur();
      } else if (key === "Enter" && !event.shiftKey && form && typing(target)) {
        // A check's one form holds the text editor and the reason for deleting: Enter presses
        // the button of the part it was typed in (the add form has no such part).
        const part = target.closest("li.check .edit-text, li.check .delete");
        if (part || target.tagName === "TEXTAREA") {
          event.preventDefault();
          if (sending.has(form)) return; // Enter again: this form's save is on its way
          const button = part && part.querySelector("button[type=submit]");
          const check = target.closest("li.check");
          if (saving && check && button) {
            queued.push({key: "save", check: check.dataset.check, value: target.value,
              part: part.matches(".delete") ? ".delete" : ".edit-text"});
            return;
          }
          send(form, button);
        }
      }
      return;
    }
    if (key.length === 1 && singleKeysOff()) return;
    const list = checks();
    const check = currentCheck();
    const index = check ? list.indexOf(check) : -1;
    if (key === "j" || key === "ArrowDown") {
      event.preventDefault();
      focusCheck(list[Math.min(index + 1, list.length - 1)]);
    } else if (key === "k" || key === "ArrowUp") {
      event.preventDefault();
      focusCheck(list[Math.max(index - 1, 0)]);
    } else if (key === "c") {
      const complete = document.querySelector("#checklist [data-testid=complete]");
      if (complete) {
        event.preventDefault();
        complete.click(); // htmx asks for the confirmation first
      }
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
      openEditor(check);
    } else if (key === "1" || key === "2" || key === "3" || key === "[" || key === "]") {
      event.preventDefault();
      focusedCheck = check.dataset.check;
      // A key pressed while a save is on its way waits for it: each applies, in order, to the
      // page as the save before it left it (sent at once, they carried one revision, and all
      // but the first were refused as stale).
      if (saving) queued.push({key: key, check: check.dataset.check});
      else checkAction(check, key);
    } else if (key === "x" || key === "Delete") {
      event.preventDefault();
      focusedCheck = check.dataset.check;
      const reason = check.querySelector('.delete input[name="reason"]');
      if (reason) reason.focus();
    }
  }

  // A check's text editor, opened by e (or Enter) or by its visible Edit button.
  function openEditor(check) {
    const editor = check.querySelector(".edit-text");
    if (!editor) return;
    editor.hidden = false;
    const area = editor.querySelector("textarea");
    area.focus();
    area.setSelectionRange(area.value.length, area.value.length);
  }

  document.addEventListener("click", function (event) {
    const button = event.target.closest && event.target.closest("#checklist [data-edit]");
    if (button) openEditor(button.closest("li.check"));
  });

  // The button a key presses on a check: 1, 2, 3 re-tier (none when the check is in that tier
  // already), [ and ] move.
  function checkAction(check, key) {
    const button = key === "[" || key === "]"
      ? check.querySelector('[data-move="' + (key === "[" ? "up" : "down") + '"]')
      : check.querySelector('[data-tier-key="' + key + '"]');
    if (!button || button.disabled) return false;
    send(button.form, button);
    return true;
  }

  // Keys waiting for the save in flight, applied one at a time once it has settled.
  const queued = [];

  function applyQueued() {
    while (!saving && queued.length) {
      const next = queued.shift();
      const check = checks().find((c) => c.dataset.check === next.check);
      if (!check) continue; // deleted meanwhile
      if (next.key === "save") {
        const part = check.querySelector(next.part);
        const field = part && part.querySelector("textarea, input[name='reason']");
        if (!field) continue;
        field.value = next.value;
        send(field.form, part.querySelector("button[type=submit]"));
        return;
      }
      if (checkAction(check, next.key)) return; // the next waits for this one
    }
  }

  // While a save is in flight, focus moves that the swap itself causes must not change which
  // check the person is on.
  let saving = false;

  document.addEventListener("focusin", function (event) {
    const check = event.target.closest && event.target.closest("#checklist li.check");
    if (check && !saving) focusedCheck = check.dataset.check;
  });

  // Where the focus goes when the check it was on leaves the list (deleted): the next check,
  // else the previous one. An added check takes the focus itself.
  let fallbackCheck = null;
  let adding = false;

  document.addEventListener("htmx:beforeRequest", function (event) {
    if (!document.getElementById("checklist")) return;
    saving = true;
    const elt = event.detail.elt;
    adding = Boolean(elt && elt.id === "add-check");
    fallbackCheck = null;
    const check = elt && elt.closest && elt.closest("li.check");
    if (check && elt.matches("[data-delete]")) {
      const list = checks();
      const index = list.indexOf(check);
      const neighbour = list[index + 1] || list[index - 1];
      fallbackCheck = neighbour ? neighbour.dataset.check : null;
    }
  });

  // The element a person holds the focus on: a live one, not the page itself (a swap that
  // removes the focused element leaves the focus on the page).
  function heldFocus() {
    const active = document.activeElement;
    return active && active !== document.body && active.isConnected ? active : null;
  }

  function restoreFocus() {
    // Only a focus that the swap took away comes back. Someone who has moved on by then (typing
    // in the add form, or on another check's button before htmx settled, 20 ms after the swap
    // and longer on a busy machine) keeps their place.
    if (heldFocus()) return;
    let again = checks().find((c) => c.dataset.check === focusedCheck);
    if (!again && fallbackCheck) {
      again = checks().find((c) => c.dataset.check === fallbackCheck);
    }
    if (again) focusCheck(again);
  }

  // After a save, the check is new HTML (and a refused save redraws the whole checklist): give
  // the focus back to the same check once htmx has settled it (htmx moves the focus itself
  // while swapping).
  // htmx:load fires on the new content itself, attached to the page (the swap events of an
  // outerHTML swap fire on the element that was replaced, which no longer reaches document).
  document.addEventListener("htmx:load", function (event) {
    const target = event.target;
    if (!(target.closest && target.closest("#checklist"))) return;
    const added = target.matches("li.check") ? target : target.querySelector("li.check");
    if (adding && !added) return; // the add form's own redraw: the new check takes the focus
    if (adding) {
      adding = false;
      // The new check takes the focus from the add form (or from nowhere); a person who has
      // gone on to another check before the add settled keeps their place.
      const held = heldFocus();
      if (!held || held.closest("#add-check")) focusCheck(added);
      return;
    }
    restoreFocus();
  });
  // Delete with no reason given: htmx holds the request back (hx-validate on the button); say
  // why, on the field.
  document.addEventListener("htmx:validation:halted", function (event) {
    const errors = event.detail.errors || [];
    if (errors.length && event.detail.elt.closest("#checklist")) errors[0].elt.reportValidity();
  });

  // Once the answer is settled, the focus moves are the person's own again, and the next key
  // that waited is applied.
  document.addEventListener("htmx:afterSettle", function () {
    if (!document.getElementById("checklist")) return;
    restoreFocus();
    saving = false;
    window.setTimeout(applyQueued, 0);
  });
  // A refusal (a real conflict: another tab saved) or a failure: the keys that waited were
  // meant for a page that is not the one shown now; they are dropped, and the refusal is said
  // on the page (the checklist's error box, or the request-failure note).
  document.addEventListener("htmx:afterRequest", function (event) {
    if (!document.getElementById("checklist")) return;
    const xhr = event.detail.xhr;
    if (event.detail.failed || (xhr && xhr.status >= 400)) queued.length = 0;
    // A request that swaps nothing settles nothing: no key may wait for it forever.
    if (event.detail.failed || !xhr || xhr.status === 0) saving = false;
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    if (!event.detail.successful) saving = false; // nothing will settle
  });

  document.addEventListener("click", function (event) {
    const cancel = event.target.closest("[data-cancel]");
    if (cancel) {
      cancel.closest(".edit-text").hidden = true;
      focusCheck(cancel.closest("li.check"));
    }
    const text = event.target.closest("#checklist .check-text");
    if (text) {
      const editor = text.closest("li.check").querySelector(".edit-text");
      if (editor) {
        editor.hidden = false;
        editor.querySelector("textarea").focus();
      }
    }
  });

  // A dialog that has just closed (Esc) leaves the focus on the button it had until the
  // browser's next rendering update takes it away, which a busy machine delays: Enter would then
  // press that unseen button (the keys dialog's "Turn them off", a full page load) instead of
  // submitting the review. A key sent to an element of a closed dialog is the page's.
  function keyTarget(event) {
    const target = event.target;
    if (target && target.closest && target.closest("dialog:not([open])")) {
      target.blur();
      return document.body;
    }
    return target;
  }
  document.addEventListener("close", function (event) {
    const dialog = event.target;
    if (dialog.tagName === "DIALOG" && dialog.contains(document.activeElement)) {
      document.activeElement.blur();
    }
  }, true);

  document.addEventListener("keydown", function (event) {
    const root = panel();
    if (!root || event.ctrlKey || event.metaKey || event.altKey) return;
    const dialog = document.getElementById("keys-help");
    if (dialog && dialog.open) return; // the dialog closes itself on Esc
    const target = keyTarget(event);
    if (root.dataset.shortcuts === "entity") {
      entityKey(event, root, dialog, target);
      return;
    }
    if (root.dataset.shortcuts === "workspace") {
      if (event.key === "?" && !typing(target)) {
        event.preventDefault();
        if (dialog) dialog.showModal();
        return;
      }
      workspaceKey(event, target);
      return;
    }
    const form = mainForm(root);
    const key = event.key;
    if (typing(target)) {
      if (target.tagName === "TEXTAREA" && key === "Enter" && !event.shiftKey && form) {
        event.preventDefault();
        submit(form);
      } else if (key === "Escape") {
        target.blur();
      }
      return;
    }
    if (pressable(target) && (key === "Enter" || key === " ")) return;
    // The expert's answer after a gold item: Enter goes on to the next question once read.
    const goOn = root.querySelector("[data-continue]");
    if (goOn && key === "Enter") {
      event.preventDefault();
      if (!goOn.disabled && !sending.has(goOn.form)) send(goOn.form, goOn);
      return;
    }
    // WCAG 2.1.4: with single-key shortcuts off, a printable key is only a key.
    if (key.length === 1 && singleKeysOff()) return;
    if (key === "?") {
      event.preventDefault();
      if (dialog) dialog.showModal();
      return;
    }
    if (key === "z") {
      toggleZoom(root.querySelector("img[data-zoom]"));
      return;
    }
    const action = root.querySelector('[data-action-key="' + key + '"]');
    if (action && (key === "u" || key === "s")) {
      event.preventDefault();
      if (!action.disabled && !sending.has(action.form)) {
        send(action.form);
      }
      return;
    }
    if (!form) return;
    const picks = form.querySelector("[data-use-revision]");
    if (key === "a" || key === "d") {
      event.preventDefault();
      choose(form, key === "a" ? "accept" : "discard");
    } else if (key === "r") {
      event.preventDefault();
      // With annotators' revisions on offer, 1 and 2 pick one next: the box waits for e.
      choose(form, "revise", !picks);
    } else if (key === "e" && root.dataset.shortcuts === "adjudicate") {
      event.preventDefault();
      choose(form, "revise");
    } else if (key === "c") {
      const comment = form.querySelector('input[name="comment"]');
      if (comment) {
        event.preventDefault();
        comment.focus();
      }
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
    if (event.target.type === "checkbox" && event.target.form) followLabels(event.target.form);
    if (event.target.tagName === "SELECT" && event.target.form) onlyForProvider(event.target.form);
  });

  // A field offered only for one provider (data-only-for-provider) beside the choice it
  // depends on (data-provider-of names the select whose options carry data-provider): hidden,
  // unticked and disabled otherwise, so that it is neither seen nor sent (the server refuses
  // it too). The judging page's "Through Gemini's Batch API" beside a judge not on Gemini.
  function onlyForProvider(form) {
    form.querySelectorAll("[data-only-for-provider]").forEach(function (field) {
      const select = form.elements.namedItem(field.dataset.providerOf);
      const option = select && select.selectedOptions && select.selectedOptions[0];
      const offered = Boolean(option && option.dataset.provider === field.dataset.onlyForProvider);
      const box = field.closest("div") || field;
      box.hidden = !offered;
      field.disabled = !offered;
      if (!offered) field.checked = false;
    });
  }

  // A submit button that says what it will do: data-label-on while the checkbox it names
  // (data-label-follows) is ticked, data-label-off otherwise ("Check" on a dry run, "Import").
  // Also on pageshow: a form the browser restored (Back) may come back unticked.
  function followLabels(form) {
    form.querySelectorAll("[data-label-follows]").forEach(function (button) {
      const box = form.elements.namedItem(button.dataset.labelFollows);
      if (!box) return;
      button.textContent = box.checked ? button.dataset.labelOn : button.dataset.labelOff;
    });
  }
  window.addEventListener("pageshow", function () {
    document.querySelectorAll("form").forEach(function (form) {
      if (form.querySelector("[data-label-follows]")) followLabels(form);
      if (form.querySelector("[data-only-for-provider]")) onlyForProvider(form);
    });
  });

  document.addEventListener("click", function (event) {
    const zoom = event.target.closest("img[data-zoom]");
    if (zoom) toggleZoom(zoom);
    const keys = event.target.closest("[data-show-keys]");
    if (keys) document.getElementById("keys-help")?.showModal();
    const use = event.target.closest("[data-use-revision]");
    if (use) {
      const form = use.closest("form");
      // Not focused: the next key (Enter, or the other annotator's number) stays a key.
      choose(form, "revise", false);
      const box = form.querySelector('textarea[name="revised_text"]');
      box.value = use.dataset.useRevision;
      // As typing would: the counter under the box (and anything else that listens) follows.
      box.dispatchEvent(new Event("input", {bubbles: true}));
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
    watchLease(root);
    // The correction box opens on c (shown without JavaScript, and again after a refusal).
    const correct = root.querySelector("[data-correct-form]");
    if (correct && !correct.querySelector(".error") && !correct.dataset.opened) {
      correct.hidden = true;
      const opener = root.querySelector("[data-open-correct]");
      if (opener) opener.hidden = false;
    }
    const form = mainForm(root);
    const box = form && form.querySelector("[data-revision-box]");
    if (box) {
      const checked = form.querySelector('input[name="decision"]:checked');
      const revising = Boolean(checked && checked.value === "revise");
      box.hidden = !revising;
      box.querySelector("textarea").disabled = !revising;
    }
  }
  document.addEventListener("htmx:load", function (event) {
    if (event.target.matches && event.target.matches("[data-shortcuts]")) {
      prepare();
      announce(event.target.dataset.announce);
    }
  });

  // The live region sits outside the swapped panel: a region that is itself replaced is never
  // read out. Emptied first so that the same words twice are announced twice.
  function announce(text) {
    const region = document.getElementById("announcer");
    if (!region || !text) return;
    region.textContent = "";
    window.setTimeout(function () { region.textContent = text; }, 50);
  }

  // The claim's lease: a warning two minutes before it ends, and what it means once it has.
  let leaseTimers = [];
  function watchLease(root) {
    leaseTimers.forEach(function (timer) { window.clearTimeout(timer); });
    leaseTimers = [];
    const left = parseInt(root.dataset.leaseLeft || "", 10);
    const note = root.querySelector("[data-lease-warning]");
    if (isNaN(left) || !note) return;
    const ends = new Date(Date.now() + left * 1000);
    const at = ends.toLocaleTimeString([], {hour: "2-digit", minute: "2-digit"});
    function warn() {
      note.hidden = false;
      note.className = "lease-warning";
      note.textContent = "Your hold on this candidate ends at " + at + ". Submit before " +
        "then, or it goes back to the pool.";
    }
    function expire() {
      note.hidden = false;
      note.className = "lease-warning expired";
      note.textContent = "Your hold on this candidate ended at " + at + ": another " +
        "annotator may have taken it. You can still submit; if its review slots are gone, " +
        "you will be told, and shown the next candidate.";
    }
    const warnAt = Math.max(0, left - 120) * 1000;
    leaseTimers.push(window.setTimeout(warn, warnAt));
    leaseTimers.push(window.setTimeout(expire, left * 1000));
  }
  document.addEventListener("DOMContentLoaded", prepare);

  // --- text fields: a live counter under the limit the server holds (templates/_limit.html),
  // and a paste cut to fit is said, never silent ------------------------------------------
  function limitNote(field) {
    const note = field && field.nextElementSibling;
    return note && note.matches && note.matches("small.limit[data-limit]") ? note : null;
  }

  function count(field, cut) {
    const note = limitNote(field);
    if (!note) return;
    const limit = parseInt(note.dataset.limit, 10);
    const used = field.value.length;
    note.textContent = used.toLocaleString("en") + " of " + limit.toLocaleString("en") +
      " characters";
    note.classList.toggle("full", used >= limit || Boolean(cut));
  }

  function countAll(root) {
    (root || document).querySelectorAll("small.limit[data-limit]").forEach(function (note) {
      const field = note.previousElementSibling;
      if (field && (field.tagName === "TEXTAREA" || field.tagName === "INPUT")) count(field);
    });
  }

  document.addEventListener("input", function (event) {
    if (limitNote(event.target)) count(event.target);
    event.target.removeAttribute("aria-invalid");
  });

  // The browser cuts a paste at the field's maxlength without a word: count what was pasted
  // against the room left, and say what did not fit.
  document.addEventListener("paste", function (event) {
    const field = event.target;
    const note = limitNote(field);
    if (!note || !event.clipboardData) return;
    const pasted = event.clipboardData.getData("text").length;
    const limit = parseInt(note.dataset.limit, 10);
    const kept = field.value.length - (field.selectionEnd - field.selectionStart);
    if (kept + pasted > limit) {
      window.setTimeout(function () {
        count(field, pasted);
        const left = kept + pasted - limit;
        note.textContent = field.value.length.toLocaleString("en") + " of " +
          limit.toLocaleString("en") + " characters: the paste held " +
          pasted.toLocaleString("en") + ", and its last " + left.toLocaleString("en") +
          " did not fit and were left out.";
      }, 0);
    }
  });
  document.addEventListener("DOMContentLoaded", function () { countAll(document); });
  document.addEventListener("htmx:load", function (event) { countAll(event.target); });

  // --- requests that fail: said in place, with what to do; the keys keep working -----------
  // The token is read from the cookie at each request: after logging in again in another tab
  // the page's own copy is stale, and a retry must carry the new one.
  function csrfCookie() {
    const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
    return match ? decodeURIComponent(match[1]) : null;
  }
  document.addEventListener("htmx:configRequest", function (event) {
    const token = csrfCookie();
    if (!token) return;
    event.detail.headers["X-CSRFToken"] = token;
    // Django reads the form's own field before the header: it must be the fresh one too.
    if (event.detail.parameters.csrfmiddlewaretoken !== undefined) {
      event.detail.parameters.csrfmiddlewaretoken = token;
    }
  });
  document.addEventListener("submit", function (event) {
    event.target._gamutSubmitter = event.submitter || null;
  }, true);

  function problemBox(elt) {
    const form = elt.closest ? (elt.closest("form") || elt) : null;
    if (!form || !form.isConnected) return null;
    let box = form.previousElementSibling;
    if (!box || !box.classList.contains("request-error")) {
      box = document.createElement("div");
      box.className = "request-error";
      box.setAttribute("role", "alert");
      box.setAttribute("data-testid", "request-error");
      form.parentNode.insertBefore(box, form);
    }
    box._gamutForm = form;
    // A button that sends its own request (the workspace's, each with its hx-post) is the one
    // to press again; a form's submit button is remembered by the submit event below.
    box._gamutButton = elt.matches && elt.matches("button[hx-post]") ? elt : null;
    return box;
  }

  function showProblem(elt, text, session) {
    const box = problemBox(elt);
    if (!box) return;
    box.textContent = "";
    const p = document.createElement("p");
    p.textContent = text;
    box.appendChild(p);
    if (session) {
      const link = document.createElement("a");
      link.href = "/login/";
      link.target = "_blank";
      link.rel = "noopener";
      link.textContent = "Log in again in a new tab";
      box.appendChild(link);
      box.appendChild(document.createTextNode(" "));
    }
    const retry = document.createElement("button");
    retry.type = "button";
    retry.className = "small primary";
    retry.dataset.retry = "";
    retry.textContent = "Retry";
    box.appendChild(retry);
  }

  function clearProblem(elt) {
    const form = elt && elt.closest ? (elt.closest("form") || elt) : null;
    const box = form && form.previousElementSibling;
    if (box && box.classList.contains("request-error")) box.remove();
  }

  // The element that sent the request (for the swap events, detail.elt is the target).
  function sender(event) {
    const config = event.detail.requestConfig;
    return (config && config.elt) || event.detail.elt;
  }

  const KEPT = " What you typed is kept on this page.";
  function describe(status, body) {
    if (status === 0) {
      return "The connection failed: the server could not be reached, so nothing was saved." +
        " Check the network, then press Retry." + KEPT;
    }
    if (status === 403 && /CSRF/i.test(body || "")) {
      return "Your session has expired (the server refused the form's security token), so " +
        "nothing was saved. Log in again in another tab, then press Retry here." + KEPT;
    }
    if (status === 403) {
      return "The server refused this (403 Forbidden): you may have been logged out or lost " +
        "the role. Log in again in another tab, then press Retry." + KEPT;
    }
    if (status === 413) {
      // The site says in one line what the limit is; a proxy's own 413 page says nothing.
      const said = (body || "").trim();
      return "Too large to send, so nothing was saved: " +
        (said && !/[<>]/.test(said) && said.length < 500 ? said :
          "the upload is over what this address takes.") +
        " Retrying the same files will be refused again." + KEPT;
    }
    if (status >= 500) {
      return "The server failed (error " + status + "), so this was not saved. Press Retry; " +
        "if it fails again, tell an admin." + KEPT;
    }
    return "The server answered " + status + ", so this was not saved. Press Retry, or " +
      "reload the page." + KEPT;
  }

  // A refusal in one plain sentence rather than the region again: the input boundary's (a text
  // over any field's limit, core/middleware.py) or a domain error no view caught. 400 and 409
  // are the statuses htmx is told to swap (base.html); a page region is never text/plain.
  function refusedInPlainText(xhr) {
    const type = xhr.getResponseHeader("Content-Type") || "";
    return (xhr.status === 400 || xhr.status === 409) && type.indexOf("text/plain") === 0;
  }

  // The name a person reads for a field: its aria-label, or its label's own words before any
  // aside ("Revised question (used only with Revise; ..." is "Revised question").
  function labelOf(field) {
    const named = field.getAttribute("aria-label");
    if (named) return named;
    const label = field.labels && field.labels[0];
    const words = label && Array.from(label.childNodes).find(function (node) {
      return node.nodeType === Node.TEXT_NODE && node.textContent.trim();
    });
    return words ? words.textContent.trim().split(" (")[0].replace(/[\s,:;]+$/, "") : "";
  }

  function showRefusal(elt, xhr) {
    const form = elt.closest ? (elt.closest("form") || elt) : null;
    const name = xhr.getResponseHeader("X-Refused-Field");
    const field = name && form && form.elements ? form.elements.namedItem(name) : null;
    let where = "";
    if (field instanceof HTMLElement && !field.hidden && field.type !== "hidden") {
      const label = labelOf(field);
      if (label) where = " It is in \u201c" + label + "\u201d, selected below.";
      field.setAttribute("aria-invalid", "true");
    }
    showProblem(elt, "Not saved: " + xhr.responseText.trim() + where + KEPT, false);
    if (where) field.focus();
  }

  document.addEventListener("htmx:beforeSwap", function (event) {
    const xhr = event.detail.xhr;
    // An expired session answers a redirect to the login page, which the browser follows:
    // never swap the login form into the page.
    if (xhr && xhr.responseURL && new URL(xhr.responseURL).pathname === "/login/" &&
        !/\/login\/$/.test(event.detail.requestConfig.path || "")) {
      event.detail.shouldSwap = false;
      event.detail.isError = false;
      showProblem(sender(event), "Your session has ended, so nothing was saved. Log in " +
        "again in another tab, then press Retry here." + KEPT, true);
    } else if (xhr && refusedInPlainText(xhr)) {
      // Said above the form, never swapped over it: what was typed stays where it was.
      event.detail.shouldSwap = false;
      event.detail.isError = false;
      showRefusal(sender(event), xhr);
    } else if (event.detail.shouldSwap) {
      clearProblem(sender(event));
    }
  });
  document.addEventListener("htmx:responseError", function (event) {
    const xhr = event.detail.xhr;
    showProblem(sender(event), describe(xhr.status, xhr.responseText), xhr.status === 403);
  });
  document.addEventListener("htmx:sendError", function (event) {
    showProblem(sender(event), describe(0, ""), false);
  });
  document.addEventListener("htmx:timeout", function (event) {
    showProblem(sender(event), describe(0, ""), false);
  });
  document.addEventListener("click", function (event) {
    const retry = event.target.closest("[data-retry]");
    if (!retry) return;
    const box = retry.closest(".request-error");
    const form = box && box._gamutForm;
    if (form && form.isConnected) {
      box.remove();
      const button = box._gamutButton && box._gamutButton.isConnected ? box._gamutButton : null;
      send(form, button || form._gamutSubmitter || null);
    }
  });

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

// Audit pages (annotation/training/views.py): a and o (reviews) or a and f (rubric rounds) pick
// the verdict; c, Enter, Esc and ? are the review page's keys above.
(function () {
  "use strict";
  document.addEventListener("keydown", function (event) {
    const root = document.querySelector('[data-shortcuts="audit"]');
    if (!root || event.ctrlKey || event.metaKey || event.altKey || event.key.length !== 1) return;
    const dialog = document.getElementById("keys-help");
    if ((dialog && dialog.open) || root.dataset.singleKeys === "off") return;
    const target = event.target;
    if (target && (target.tagName === "TEXTAREA" || (target.tagName === "INPUT" &&
        !["radio", "checkbox", "hidden"].includes(target.type)))) return;
    const radio = root.querySelector('input[name="decision"][data-key="' + event.key + '"]');
    if (!radio) return;
    event.preventDefault();
    radio.checked = true;
  });
})();
