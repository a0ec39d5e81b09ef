// A JupyterLab extension written by hand, so it needs no build step: JupyterLab loads this container and
// asks it for "./style" (links classroom.css, whose url()s are relative to it and so stay right under any
// base URL: JupyterHub, Binder) and "./extension" (one plugin: fold the left sidebar once the layout is
// restored, so a notebook gets the whole width of a projector; Ctrl+B or the folder icon brings it back).
var _JUPYTERLAB;
(function () {
  var here = document.currentScript.src.replace(/[^/]*$/, "");
  var modules = {
    "./style": function () {
      var link = document.createElement("link");
      link.rel = "stylesheet";
      link.href = here + "classroom.css";
      document.head.appendChild(link);
      return {};
    },
    "./extension": function () {
      return {
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
