#include "exporters/flamegraph_svg_script.h"

namespace pystrobe {

const std::string_view kFlameGraphSvgStyle = R"css(
text { font-family: Verdana, sans-serif; font-size: 12px; fill: rgb(0,0,0); }
#title { text-anchor: middle; font-size: 17px; }
#subtitle { text-anchor: middle; fill: rgb(90,90,90); }
#nosamples { text-anchor: middle; font-size: 17px; fill: rgb(120,120,120); }
#search, #matched { text-anchor: end; }
.control { cursor: pointer; fill: rgb(0,0,160); }
.control:hover { text-decoration: underline; }
.hide { display: none; }
g.f { cursor: pointer; }
g.f:hover > rect { stroke: rgb(0,0,0); stroke-width: 0.5; }
g.f.parent { opacity: 0.5; }
g.f > text { pointer-events: none; }
)css";

const std::string_view kFlameGraphSvgScript = R"js(
(function () {
  'use strict';
  var kMatchFill = 'rgb(230,0,230)';
  var script = document.currentScript;
  // Standalone, the SVG is the document; inlined in HTML it is not.
  var svg = (script && script.ownerSVGElement) || document.documentElement;
  function byId(id) { return svg.querySelector('#' + id); }

  var framesGroup = byId('frames');
  var details = byId('details');
  var unzoomButton = byId('unzoom');
  var searchButton = byId('search');
  var matchedText = byId('matched');
  var total = Number(framesGroup.getAttribute('data-total'));
  var left = Number(framesGroup.getAttribute('data-x'));
  var width = Number(framesGroup.getAttribute('data-width'));
  var charWidth = Number(framesGroup.getAttribute('data-char-width'));

  var frames = [];
  var frameByGroup = new Map();
  Array.prototype.forEach.call(framesGroup.querySelectorAll('g.f'), function (g) {
    var title = g.querySelector('title').textContent;
    var frame = {
      g: g,
      rect: g.querySelector('rect'),
      text: g.querySelector('text'),
      title: title,
      // The writer appends exactly this suffix (a differential graph adds a
      // note without parentheses); the name itself may hold parentheses.
      name: title.replace(/ \(\d+ [a-z]+, [0-9.]+%(, [^()]*)?\)$/, ''),
      start: Number(g.getAttribute('data-start')),
      count: Number(g.getAttribute('data-count')),
      depth: Number(g.getAttribute('data-depth')),
    };
    frame.fill = frame.rect.getAttribute('fill');
    frames.push(frame);
    frameByGroup.set(g, frame);
  });

  function frameOf(node) {
    var g = node && node.closest ? node.closest('g.f') : null;
    return g ? frameByGroup.get(g) : undefined;
  }

  // Same rule as the writer: whole code points, ".." when cut, nothing when
  // fewer than three characters fit.
  function fitText(name, w) {
    var chars = Math.floor(w / charWidth);
    if (chars < 3) return '';
    var points = Array.from(name);
    if (points.length <= chars) return name;
    return points.slice(0, chars - 2).join('') + '..';
  }

  function place(frame, x, w) {
    frame.g.classList.remove('hide');
    frame.rect.setAttribute('x', x.toFixed(2));
    frame.rect.setAttribute('width', w.toFixed(2));
    frame.text.setAttribute('x', (x + 3).toFixed(2));
    frame.text.textContent = fitText(frame.name, w);
  }

  // Zooming keeps the target's ancestors (full width, faded), rescales the
  // target and its callees to the full width, and hides everything else.
  function zoom(target) {
    var end = target.start + target.count;
    frames.forEach(function (f) {
      var fEnd = f.start + f.count;
      if (f.depth < target.depth && f.start <= target.start && fEnd >= end) {
        place(f, left, width);
        f.g.classList.add('parent');
      } else if (f.depth >= target.depth && f.start >= target.start && fEnd <= end) {
        place(f, left + (f.start - target.start) / target.count * width,
              f.count / target.count * width);
        f.g.classList.remove('parent');
      } else {
        f.g.classList.add('hide');
      }
    });
    unzoomButton.classList.toggle('hide', target.depth === 0);
  }

  function resetZoom() {
    if (frames.length > 0) zoom(frames[0]);
  }

  var searching = false;

  function clearSearch() {
    frames.forEach(function (f) { f.rect.setAttribute('fill', f.fill); });
    matchedText.classList.add('hide');
    searchButton.textContent = 'Search';
    searching = false;
  }

  function search(term) {
    if (!term) {
      clearSearch();
      return;
    }
    var re = null;
    try {
      re = new RegExp(term);
    } catch (err) {
      re = null;  // not a valid regular expression: match it as plain text
    }
    var matches = [];
    frames.forEach(function (f) {
      var hit = re ? re.test(f.name) : f.name.indexOf(term) !== -1;
      f.rect.setAttribute('fill', hit ? kMatchFill : f.fill);
      if (hit) matches.push(f);
    });
    // A recursive function matches at several depths; count each sample
    // once by summing the union of the matched sample ranges.
    matches.sort(function (a, b) { return a.start - b.start; });
    var covered = 0;
    var coveredEnd = 0;
    matches.forEach(function (f) {
      var fEnd = f.start + f.count;
      if (fEnd <= coveredEnd) return;
      covered += fEnd - Math.max(f.start, coveredEnd);
      coveredEnd = fEnd;
    });
    var percent = total > 0 ? 100 * covered / total : 0;
    matchedText.textContent = 'Matched: ' + percent.toFixed(2) + '%';
    matchedText.classList.remove('hide');
    searchButton.textContent = 'Reset Search';
    searching = true;
  }

  function promptSearch() {
    var term = window.prompt(
        'Search frames (a regular expression; plain text if it is not one):', '');
    if (term !== null) search(term);
  }

  framesGroup.addEventListener('mouseover', function (e) {
    var f = frameOf(e.target);
    if (f) details.textContent = 'Function: ' + f.title;
  });
  framesGroup.addEventListener('mouseout', function () {
    details.textContent = ' ';
  });
  framesGroup.addEventListener('click', function (e) {
    var f = frameOf(e.target);
    if (f) zoom(f);
  });
  unzoomButton.addEventListener('click', resetZoom);
  searchButton.addEventListener('click', function () {
    if (searching) {
      clearSearch();
    } else {
      promptSearch();
    }
  });
  window.addEventListener('keydown', function (e) {
    if ((e.ctrlKey || e.metaKey) && (e.key === 'f' || e.key === 'F')) {
      e.preventDefault();
      promptSearch();
    } else if (e.key === 'Escape') {
      clearSearch();
    }
  });

  var initialSearch = new URLSearchParams(window.location.search).get('s');
  if (initialSearch) search(initialSearch);

  document.documentElement.setAttribute('data-pystrobe-ready', '1');
  svg.setAttribute('data-pystrobe-ready', '1');
})();
)js";

}  // namespace pystrobe
