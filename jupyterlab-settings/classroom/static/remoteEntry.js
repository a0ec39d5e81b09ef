// A JupyterLab extension written by hand, so it needs no build step: JupyterLab loads this container and
// asks it for "./style" (links classroom.css, whose url()s are relative to it and so stay right under any
// base URL: JupyterHub, Binder) and "./extension" (two plugins: fold the left sidebar once the layout is
// restored, so a notebook gets the whole width of a projector, Ctrl+B or the folder icon bringing it back;
// and a way out of Deck mode (jupyterlab-slideshow) that always works from the keyboard).
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

  var modules = {
    "./style": function () {
      var link = document.createElement("link");
      link.rel = "stylesheet";
      link.href = here + "classroom.css";
      document.head.appendChild(link);
      return {};
    },
    "./extension": function () {
      return [foldFileBrowser, deckExit];
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
