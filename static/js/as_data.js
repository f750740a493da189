/*
 * Copy buttons of the "View as JSON / YAML" panel (templates/components/_as_data_panel.html).
 *
 * A button names the <pre> it copies in data-copy-target. It is rendered hidden (it
 * could do nothing without JavaScript) and shown here, on page load and whenever htmx
 * swaps the panel in. A click writes the text to the clipboard (the Clipboard API);
 * where the browser refuses, the text is selected instead so Ctrl+C / Cmd+C copies it.
 * The panel's status line says which happened (role="status": screen readers hear it).
 */
(function () {
  "use strict";

  function reveal(root) {
    var buttons = (root || document).querySelectorAll("button[data-copy-target][hidden]");
    for (var i = 0; i < buttons.length; i++) {
      buttons[i].hidden = false;
    }
  }

  function say(button, text) {
    var panel = button.closest(".as-data, .as-data__page, main") || document;
    var status = panel.querySelector("[data-copy-status]");
    if (status) {
      status.textContent = text;
    }
  }

  function select(element) {
    var range = document.createRange();
    range.selectNodeContents(element);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }

  function copy(button) {
    var target = document.getElementById(button.getAttribute("data-copy-target"));
    if (!target) {
      return;
    }
    var label = button.getAttribute("data-copy-label") || "The text";
    function fallback() {
      select(target);
      target.focus();
      say(button, label + " is selected: press Ctrl+C (Cmd+C on a Mac) to copy it.");
    }
    if (!navigator.clipboard || !navigator.clipboard.writeText) {
      fallback();
      return;
    }
    navigator.clipboard.writeText(target.textContent).then(function () {
      say(button, label + " copied to the clipboard.");
    }, fallback);
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest("button[data-copy-target]");
    if (button) {
      copy(button);
    }
  });
  document.addEventListener("htmx:load", function (event) {
    reveal(event.target);
  });
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () {
      reveal(document);
    });
  } else {
    reveal(document);
  }
})();
