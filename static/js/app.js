/*
 * The product's one script (no framework). It:
 *  1. renders every Plotly chart on the page. A chart is written as
 *       <figure>
 *         <div data-plotly-figure data-figure-id="queue-usage-figure"></div>
 *         {{ figure|json_script:"queue-usage-figure" }}
 *         <figcaption>What it shows and what to look for.</figcaption>
 *       </figure>
 *     followed by its data table or CSV link (the text alternative). data-figure-id
 *     names the <script type="application/json"> that json_script wrote, holding the
 *     figure JSON of a builder in governance/dashboards/ ({data, layout, config}).
 *     Do not give the chart element role="img": Plotly's mode bar inside it has
 *     focusable buttons, which axe reports as nested-interactive (serious).
 *     plotly.js is big, so only pages with charts load it, in their extra_js block:
 *       {% block extra_js %}<script src="{% static 'vendor/plotly.min.js' %}"></script>{% endblock %}
 *     or, to show the page before it arrives, name it on an element of the page:
 *       <div data-plotly-src="{% static 'vendor/plotly.min.js' %}">…charts…</div>
 *     (served from the installed plotly package, see governance/staticfiles.py).
 *  2. shows every <time datetime="…"> in the user's time zone (<body data-time-zone>,
 *     the zone the server used: the profile's choice, else the browser's), keeping UTC
 *     in the title (hover); the server already wrote that zone's text
 *     ({% localtime_tag %}), which stays when JavaScript is off and when printing.
 *     It also tells the server the browser's zone: the browser_tz cookie on every page,
 *     and, for a signed-in user who has none stored yet (<body data-time-zone-store>),
 *     one POST that stores it in their profile (changeable on accounts/profile/).
 *  3. lets Escape hide an open glossary tooltip (WCAG 1.4.13).
 *  4. keeps the change and keyup events of a field marked data-no-preview from reaching
 *     its form, so typing there does not ask htmx for a new preview (the page's CSP
 *     forbids eval, so htmx's hx-on attributes cannot do this).
 *  5. keeps a share form's borrow limit for the strategies that take one (each radio's
 *     data-takes-borrow-limit, from the engine's table): choosing another
 *     strategy empties and disables the field (a disabled field is not sent, so a
 *     borrow limit left over from before cannot block saving); choosing
 *     one that takes it again enables it.
 *     A chart is drawn when it nears the viewport (IntersectionObserver), those in
 *     view at once; printing draws the rest. On a narrow screen (a phone) its title
 *     is wrapped to the chart's width.
 * 1 and 2 run on page load and again after every htmx swap; both skip what is already
 * done (a drawn chart is marked data-plotted), so only swapped-in content
 * changes, whatever the swap style (an outerHTML swap replaces the event's target).
 */
(function () {
  "use strict";

  var PLOT_CONFIG = { responsive: true, displaylogo: false };

  var plotlyRequested = false;

  // A page may name plotly.js in data-plotly-src instead of loading it with a script
  // tag: it is then fetched once the page has loaded, so the figures and tables show at
  // once and the 4.7 MB library (compiled for seconds on a busy machine) draws the
  // charts when it arrives.
  function loadPlotly(src) {
    if (plotlyRequested) {
      return;
    }
    plotlyRequested = true;
    function inject() {
      var script = document.createElement("script");
      script.src = src;
      script.onload = function () {
        renderCharts(document);
      };
      script.onerror = function () {
        console.error("plotly.js could not be loaded from " + src);
      };
      document.head.appendChild(script);
    }
    if (document.readyState === "complete") {
      inject();
    } else {
      window.addEventListener("load", inject, { once: true });
    }
  }

  // Charts are drawn when they near the viewport (DRAW_AHEAD before they scroll in),
  // not all at once on load: a dashboard has nine, and drawing them all held the first
  // visit for seconds. Printing draws the rest first (beforeprint).
  var DRAW_AHEAD = "300px 0px";
  var NARROW = 560; // px: below this a chart's title is wrapped to fit its width
  var observer = null;

  function nearViewport(element) {
    var box = element.getBoundingClientRect();
    var height = window.innerHeight || document.documentElement.clientHeight;
    return box.bottom >= -300 && box.top <= height + 300;
  }

  // Wraps a title onto lines that fit `width` px (Plotly never wraps one) and makes it
  // smaller on a phone; the title's automargin then makes room for every line.
  function fitLayout(layout, width) {
    var fitted = Object.assign({}, layout);
    var title = fitted.title;
    if (title && typeof title === "object" && title.text && width && width < NARROW) {
      var size = 14;
      var perLine = Math.max(12, Math.floor((width - 16) / (size * 0.56)));
      var lines = [];
      var line = "";
      String(title.text)
        .split(" ")
        .forEach(function (word) {
          if (line && (line + " " + word).length > perLine) {
            lines.push(line);
            line = word;
          } else {
            line = line ? line + " " + word : word;
          }
        });
      if (line) {
        lines.push(line);
      }
      // Plotly anchors a title of several lines by its first line's baseline, so
      // each further line needs a little more room above.
      var pad = Object.assign({}, title.pad || {});
      pad.t = (pad.t || 0) + 6 * (lines.length - 1);
      fitted.title = Object.assign({}, title, {
        text: lines.join("<br>"),
        font: Object.assign({}, title.font || {}, { size: size }),
        pad: pad,
      });
      var margin = Object.assign({}, fitted.margin || {});
      margin.l = Math.min(margin.l === undefined ? 60 : margin.l, 48);
      margin.r = Math.min(margin.r === undefined ? 20 : margin.r, 40);
      // Room for every line of the title above the plot (its automargin alone
      // counts one line on some charts, so an axis title met the second).
      margin.t = Math.max(margin.t || 0, pad.t + Math.ceil(lines.length * size * 1.3) + 14);
      fitted.margin = margin;
    }
    return fitted;
  }

  function draw(element) {
    if (element.dataset.plotted !== undefined) {
      return;
    }
    if (observer) {
      observer.unobserve(element);
    }
    var source = document.getElementById(element.dataset.figureId);
    if (!source) {
      console.error("No figure JSON with id " + element.dataset.figureId);
      return;
    }
    var figure = JSON.parse(source.textContent);
    var config = Object.assign({}, figure.config || {}, PLOT_CONFIG);
    var layout = fitLayout(figure.layout || {}, element.clientWidth);
    element.dataset.plotted = "";
    window.Plotly.newPlot(element, figure.data || [], layout, config);
  }

  function drawWhenNear(element) {
    if (!window.IntersectionObserver) {
      draw(element);
      return;
    }
    if (!observer) {
      observer = new IntersectionObserver(
        function (entries) {
          entries.forEach(function (entry) {
            if (entry.isIntersecting) {
              draw(entry.target);
            }
          });
        },
        { rootMargin: DRAW_AHEAD }
      );
    }
    observer.observe(element);
  }

  function renderCharts(root) {
    var charts = root.querySelectorAll("[data-plotly-figure]:not([data-plotted])");
    if (!charts.length) {
      return;
    }
    if (!window.Plotly) {
      var source = document.querySelector("[data-plotly-src]");
      if (source) {
        loadPlotly(source.dataset.plotlySrc);
        return;
      }
      // Loud on purpose: the browser tests fail on console errors.
      console.error(
        "This page has charts but does not load plotly.js: add vendor/plotly.min.js in extra_js."
      );
      return;
    }
    // Those in view first, in one go; the others as they near the viewport.
    var later = [];
    charts.forEach(function (element) {
      if (nearViewport(element)) {
        draw(element);
      } else {
        later.push(element);
      }
    });
    later.forEach(drawWhenNear);
  }

  window.addEventListener("beforeprint", function () {
    if (window.Plotly) {
      document.querySelectorAll("[data-plotly-figure]:not([data-plotted])").forEach(draw);
    }
  });

  function browserZone() {
    try {
      return Intl.DateTimeFormat().resolvedOptions().timeZone || "";
    } catch (error) {
      return "";
    }
  }

  function pageZone() {
    return (document.body && document.body.dataset.timeZone) || browserZone() || undefined;
  }

  function localTimeFormat() {
    var options = {
      day: "numeric",
      month: "short",
      year: "numeric",
      hour: "2-digit",
      minute: "2-digit",
      hourCycle: "h23",
      timeZoneName: "short",
    };
    try {
      return new Intl.DateTimeFormat("en-GB", Object.assign({ timeZone: pageZone() }, options));
    } catch (error) {
      return new Intl.DateTimeFormat("en-GB", options); // a zone this browser does not know
    }
  }

  var LOCAL_TIME = null;

  // The browser's zone, for the server: a cookie (used until the user stores a zone)
  // and, once, the profile of a signed-in user who has none.
  function reportZone() {
    var zone = browserZone();
    if (!zone) {
      return;
    }
    var secure = window.location.protocol === "https:" ? "; Secure" : "";
    document.cookie =
      "browser_tz=" + encodeURIComponent(zone) + "; path=/; max-age=31536000; SameSite=Lax" + secure;
    var storeUrl = document.body && document.body.dataset.timeZoneStore;
    if (!storeUrl) {
      return;
    }
    var token = "";
    try {
      token = JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || "";
    } catch (error) {
      token = "";
    }
    var body = new URLSearchParams();
    body.set("time_zone", zone);
    fetch(storeUrl, {
      method: "POST",
      credentials: "same-origin",
      headers: { "X-CSRFToken": token },
      body: body,
    }).then(function () {
      delete document.body.dataset.timeZoneStore;
    }, function () {
      // Not stored this time: the cookie still carries the zone, and the next page tries again.
    });
  }
  var UTC_TIME = new Intl.DateTimeFormat("en-GB", {
    day: "numeric",
    month: "short",
    year: "numeric",
    hour: "2-digit",
    minute: "2-digit",
    hourCycle: "h23",
    timeZone: "UTC",
  });

  function localiseTimes(root) {
    root.querySelectorAll("time[datetime]:not([data-localised])").forEach(function (element) {
      var value = element.getAttribute("datetime");
      if (value.indexOf("T") === -1) {
        return; // a date without a time has no time zone
      }
      var instant = new Date(value);
      if (isNaN(instant.getTime())) {
        return;
      }
      LOCAL_TIME = LOCAL_TIME || localTimeFormat();
      element.textContent = LOCAL_TIME.format(instant);
      element.title = UTC_TIME.format(instant) + " UTC";
      element.dataset.localised = "";
    });
  }

  function syncBorrowLimit(form) {
    var limit = form.querySelector('input[name="borrow_limit"]');
    var chosen = form.querySelector('input[name="strategy"]:checked');
    if (!limit || !chosen) {
      return;
    }
    var applies = chosen.dataset.takesBorrowLimit === "true";
    if (!applies && limit.value !== "") {
      limit.dataset.keptValue = limit.value;
      limit.value = "";
    }
    if (applies && limit.disabled && limit.dataset.keptValue) {
      limit.value = limit.dataset.keptValue;
    }
    limit.disabled = !applies;
  }

  function syncBorrowLimits(root) {
    root.querySelectorAll("form").forEach(function (form) {
      syncBorrowLimit(form);
    });
  }

  document.addEventListener(
    "change",
    function (event) {
      if (event.target.name === "strategy" && event.target.form) {
        syncBorrowLimit(event.target.form);
      }
    },
    true
  );

  // Pickers that narrow each other (core/widgets.py): an option or checkbox with
  // data-narrow-by="id_team" data-narrow="3 7" fits only when the picker id_team has
  // 3 or 7 chosen (or nothing). The others are hidden and disabled; a chosen one that no
  // longer fits is let go, and pickers narrowed by this one follow. The server refuses
  // what does not fit anyway, naming the field.
  function narrowBy(parent) {
    var chosen = parent.value;
    var changed = [];
    document.querySelectorAll('[data-narrow-by="' + parent.id + '"]').forEach(function (item) {
      var fits = !chosen || item.dataset.narrow.split(" ").indexOf(chosen) !== -1;
      if (item.tagName === "OPTION") {
        item.hidden = !fits;
        item.disabled = !fits;
        if (!fits && item.selected) {
          item.selected = false;
          item.parentElement.closest("select").value = "";
          changed.push(item.closest("select"));
        }
      } else {
        var box = item.closest("label") || item;
        (box.parentElement || box).hidden = !fits;
        item.disabled = !fits;
        if (!fits && item.checked) {
          item.checked = false;
        }
      }
    });
    changed.forEach(function (select) {
      if (select.id) {
        narrowBy(select);
      }
    });
  }

  function narrowPickers(root) {
    var parents = {};
    root.querySelectorAll("[data-narrow-by]").forEach(function (item) {
      parents[item.dataset.narrowBy] = true;
    });
    Object.keys(parents).forEach(function (id) {
      var parent = document.getElementById(id);
      if (parent) {
        narrowBy(parent);
      }
    });
  }

  document.addEventListener(
    "change",
    function (event) {
      var target = event.target;
      if (target.id && document.querySelector('[data-narrow-by="' + target.id + '"]')) {
        narrowBy(target);
      }
    },
    true
  );

  function enhance(root) {
    renderCharts(root);
    localiseTimes(root);
    syncBorrowLimits(document);
    narrowPickers(document);
  }

  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape") {
      return;
    }
    document.querySelectorAll(".term:hover, .term:focus-within").forEach(function (term) {
      term.classList.add("term--dismissed");
    });
  });
  ["focusout", "mouseout"].forEach(function (type) {
    document.addEventListener(type, function (event) {
      var term = event.target.closest && event.target.closest(".term--dismissed");
      if (term && !term.contains(event.relatedTarget)) {
        term.classList.remove("term--dismissed");
      }
    });
  });

  ["change", "keyup"].forEach(function (type) {
    document.addEventListener(
      type,
      function (event) {
        var field = event.target.closest && event.target.closest("[data-no-preview]");
        if (field) {
          event.stopPropagation();
        }
      },
      true
    );
  });

  document.addEventListener("htmx:afterSwap", function () {
    enhance(document);
  });

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () {
      reportZone();
      enhance(document);
    });
  } else {
    reportZone();
    enhance(document);
  }
})();
