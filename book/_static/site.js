/* The site on every screen (with site.css).
 *
 * Figures are drawn for a wide column; on a phone their text is small. Each figure
 * image that is not a link already becomes a link to its own file, so that a click
 * or a tap opens it at full size (the browser then zooms as it pleases).
 */
(function () {
  "use strict";

  function linkFigures() {
    var images = document.querySelectorAll(
      ".bd-article figure img, .bd-article div.cell_output img, .bd-article img.rope-figure"
    );
    Array.prototype.forEach.call(images, function (img) {
      if (img.closest("a")) return;
      var link = document.createElement("a");
      link.className = "rope-figure-link";
      link.href = img.currentSrc || img.src;
      link.setAttribute("aria-label", "Open the figure at full size: " + (img.alt || ""));
      img.parentNode.insertBefore(link, img);
      link.appendChild(img);
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", linkFigures);
  } else {
    linkFigures();
  }
})();
