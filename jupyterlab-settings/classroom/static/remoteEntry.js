// A JupyterLab extension written by hand, so it needs no build step: JupyterLab loads this container and
// asks it for "./style" (links classroom.css, whose url()s are relative to it and so stay right under any
// base URL: JupyterHub, Binder) and "./extension" (three plugins: fold the left sidebar once the layout is
// restored, so a notebook gets the whole width of a projector, Ctrl+B or the folder icon bringing it back;
// a way out of Deck mode (jupyterlab-slideshow) that always works from the keyboard; and a clicker that
// keeps walking the deck after a slider has moved, with ↓ and ↑ to skip a slide).
var _JUPYTERLAB;
(function () {
  var here = document.currentScript.src.replace(/[^/]*$/, "");
  var DECK_PLUGIN = "jupyterlab-slideshow:plugin";

  function presenting() {
    return document.body.dataset.jpDeckMode === "presenting";
  }

  var foldFileBrowser = {
    id: "walkthrough-classroom:fold-file-browser",
    description: "Folds the left sidebar when JupyterLab opens.",
    autoStart: true,
    activate: function (app) {
      app.restored.then(function () {
        // The file browser opens itself on a fresh layout right after `restored`: fold after it.
        setTimeout(function () {
          if (app.shell.collapseLeft) {
            app.shell.collapseLeft();
          }
        }, 0);
      });
    }
  };

  // Deck mode binds Esc only while a notebook cell has the focus, and JupyterLab ignores every shortcut
  // typed into a widget's text box (ipywidgets marks them data-lm-suppress-shortcuts), so a teacher could
  // be stuck in a deck with no menus. This plugin makes the way out unconditional:
  // - Alt+R (Option+R) and Esc leave a presented deck from anywhere (a widget's text box, nothing focused),
  //   except that Esc first leaves a cell's editor, a dialog or a menu, as it does outside the deck;
  // - closing the presented notebook leaves the deck, so the notebook reopens as a notebook, with menus;
  // - a deck left "active" in the settings by an earlier session is stopped once when JupyterLab opens:
  //   a notebook opens as a notebook.
  var deckExit = {
    id: "walkthrough-classroom:deck-exit",
    description: "Leaves Deck mode by Alt+R or Esc from anywhere, and when the presented notebook closes.",
    autoStart: true,
    activate: function (app) {
      function stopDeck() {
        if (presenting() && app.commands.hasCommand("deck:stop")) {
          app.commands.execute("deck:stop");
        }
      }

      // Capture on window runs before JupyterLab's own key handling (capture on document).
      window.addEventListener("keydown", function (event) {
        if (!presenting() || event.ctrlKey || event.metaKey) {
          return;
        }
        var altR = event.altKey && event.code === "KeyR" && !event.shiftKey;
        var escape = event.key === "Escape" && !event.altKey && !event.shiftKey;
        if (!altR && !escape) {
          return;
        }
        var target = event.target && event.target.closest ? event.target : null;
        if (escape && target && target.closest(".cm-editor, .jp-Dialog, .lm-Menu, .jp-Completer")) {
          return;
        }
        event.preventDefault();
        event.stopPropagation();
        stopDeck();
      }, true);

      // Every widget shown while presenting: when one closes, the deck ends (the shell has already moved on
      // to another widget by then, so "the one being presented" cannot be asked at that moment).
      var watched = new WeakSet();
      var presented = new WeakSet();
      function watch(widget) {
        if (!widget) {
          return;
        }
        if (presenting()) {
          presented.add(widget);
        }
        if (!watched.has(widget)) {
          watched.add(widget);
          widget.disposed.connect(function () {
            if (presented.has(widget)) {
              stopDeck();
            }
          });
        }
      }
      app.shell.currentChanged.connect(function (shell, change) {
        watch(change.newValue);
      });
      new MutationObserver(function () {
        watch(app.shell.currentWidget);
      }).observe(document.body, {attributes: true, attributeFilter: ["data-jp-deck-mode"]});

      app.restored.then(function () {
        return app.serviceManager.settings.fetch(DECK_PLUGIN);
      }).then(function (plugin) {
        if (!/"active"\s*:\s*true/.test((plugin && plugin.raw) || "")) {
          return;
        }
        if (presenting()) {
          stopDeck();
          return;
        }
        var stale = new MutationObserver(function () {
          if (presenting()) {
            stale.disconnect();
            stopDeck();
          }
        });
        stale.observe(document.body, {attributes: true, attributeFilter: ["data-jp-deck-mode"]});
      }).catch(function () {
        // No Deck extension in this JupyterLab: nothing to stop.
      });
    }
  };

  // The shipped shortcuts (overrides.json) walk the deck only while a notebook cell has the focus. A slider
  // takes the focus when it is moved, and it both eats PageDown/PageUp (noUiSlider's big steps) and is marked
  // data-lm-suppress-shortcuts by ipywidgets: the next clicker press moved the slider, not the deck. So, while
  // presenting:
  // - PageDown/PageUp always walk the deck, wherever the focus is (a widget, the page itself), except in a cell's
  //   editor, a dialog or a menu;
  // - a slider keeps its own arrow keys while it has the focus (a teacher can step it from the keyboard);
  // - it gives the focus back to the notebook once moved by the pointer or typed into (Enter), and on any click
  //   outside it, so → and ← walk the deck again;
  // - → and ← also walk the deck while the focus is on no widget and outside the notebook (the page itself, after a
  //   click in the margin): giving the focus back waits for the click to end, and a key pressed before that (a
  //   browser busy for a few ms was enough) was lost.
  var WIDGET = ".jupyter-widgets, [data-lm-suppress-shortcuts]";
  var NOT_OURS = ".cm-editor, .jp-Dialog, .lm-Menu, .jp-Completer";
  var DECK_STEP = {
    PageDown: {direction: "down", alternate: "forward"},
    PageUp: {direction: "up", alternate: "back"}
  };
  var ARROW_STEP = {
    ArrowRight: DECK_STEP.PageDown,
    ArrowLeft: DECK_STEP.PageUp
  };

  var clickerAfterSlider = {
    id: "walkthrough-classroom:clicker-after-slider",
    description: "PageDown/PageUp walk a presented deck even when a slider has the focus; → and ← when no widget has it.",
    autoStart: true,
    activate: function (app) {
      function focusNotebook() {
        var panel = app.shell.currentWidget;
        var notebook = panel && panel.content;
        if (!notebook || !notebook.activeCell) {
          return;
        }
        notebook.mode = "command";
        notebook.activeCell.node.focus();
      }

      function inWidget(element) {
        return !!(element && element.closest && element.closest(WIDGET));
      }

      function focusLeftTheNotebook() {
        var focused = document.activeElement;
        return !focused || focused === document.body || inWidget(focused) || !focused.closest(".jp-Notebook");
      }

      // ↓ and ↑ skip a slide: the deck's own keys move one cell at a time, so a teacher who is late would press
      // through every cell. ↓ makes the next slide's first cell active (from anywhere on a slide), ↑ the first cell
      // of this slide, or of the one before when already there; the deck shows the active cell's slide.
      function startsSlide(cell) {
        var slide = cell.model.getMetadata("slideshow") || {};
        return slide.slide_type === "slide" || slide.slide_type === "subslide";
      }

      function skipSlide(step) {
        var panel = app.shell.currentWidget;
        var notebook = panel && panel.content;
        if (!notebook || !notebook.widgets) {
          return;
        }
        var cells = notebook.widgets;
        var index = notebook.activeCellIndex + step;
        while (index > 0 && index < cells.length && !startsSlide(cells[index])) {
          index += step;
        }
        if (index >= 0 && index < cells.length) {
          notebook.activeCellIndex = index;
          focusNotebook();
        }
      }

      var SKIP = {ArrowDown: 1, ArrowUp: -1};

      window.addEventListener("keydown", function (event) {
        var step = DECK_STEP[event.key] || (!inWidget(document.activeElement) && ARROW_STEP[event.key]);
        var skip = !inWidget(document.activeElement) && SKIP[event.key];
        if (skip && presenting() && !event.altKey && !event.ctrlKey && !event.metaKey && !event.shiftKey) {
          var focused = event.target && event.target.closest ? event.target : null;
          if (!(focused && focused.closest(NOT_OURS))) {
            event.preventDefault();
            event.stopPropagation();
            skipSlide(skip);
          }
          return;
        }
        if (!presenting() || event.altKey || event.ctrlKey || event.metaKey || event.shiftKey) {
          return;
        }
        if (step) {
          var target = event.target && event.target.closest ? event.target : null;
          if ((target && target.closest(NOT_OURS)) || !focusLeftTheNotebook()) {
            return;  // the shipped shortcut walks the deck, or the key belongs to an editor, dialog or menu
          }
          event.preventDefault();
          event.stopPropagation();
          focusNotebook();
          app.commands.execute("deck:go", step);
        } else if (event.key === "Enter" && event.target.closest && event.target.closest(".widget-readout")) {
          setTimeout(focusNotebook, 0);  // after the readout has taken the typed value
        }
      }, true);

      var sliderDragged = false;
      window.addEventListener("pointerdown", function (event) {
        if (!presenting()) {
          return;
        }
        var target = event.target && event.target.closest ? event.target : null;
        sliderDragged = !!(target && target.closest(".noUi-target"));
        if (!inWidget(target)) {
          setTimeout(function () {
            if (focusLeftTheNotebook()) {
              focusNotebook();
            }
          }, 0);  // a click on another cell has focused it by then: keep that
        }
      }, true);
      window.addEventListener("pointerup", function () {
        if (presenting() && sliderDragged) {
          sliderDragged = false;
          setTimeout(focusNotebook, 0);  // after noUiSlider has ended the drag and set the value
        }
      }, true);
    }
  };

  var modules = {
    "./style": function () {
      var link = document.createElement("link");
      link.rel = "stylesheet";
      link.href = here + "classroom.css";
      document.head.appendChild(link);
      return {};
    },
    "./extension": function () {
      return [foldFileBrowser, deckExit, clickerAfterSlider];
    }
  };
  (_JUPYTERLAB = _JUPYTERLAB || {})["walkthrough-classroom"] = {
    init: function () { return Promise.resolve(); },
    get: function (name) {
      if (!modules[name]) {
        return Promise.reject(new Error("walkthrough-classroom has no module " + name));
      }
      return Promise.resolve(modules[name]);
    }
  };
})();
