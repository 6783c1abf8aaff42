/* The site search's scores (Sphinx's html_search_scorer): Sphinx's defaults, and one
 * change: a chapter's own page (book/NN_*.html) wins a tie with the back matter (the
 * glossary, the API reference), so that searching a chapter's subject (p-RoPE, VO-RoPE,
 * YaRN, NoPE, critical pair), whose main index entry sits in that chapter, lists the
 * chapter first.
 */
var Scorer = {
  score: function (result) {
    var docname = result[0], score = result[4];
    return /^book\/\d\d_/.test(docname) ? score + 1 : score;
  },
  // Sphinx's defaults (sphinx/themes/basic/static/searchtools.js)
  objNameMatch: 11,
  objPartialMatch: 6,
  objPrio: { 0: 15, 1: 5, 2: -5 },
  objPrioDefault: 0,
  title: 15,
  partialTitle: 7,
  term: 5,
  partialTerm: 2,
};
