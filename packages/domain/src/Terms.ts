/**
 * Term counting for peer representations: lower-cased words of at least three letters or digits, minus
 * common English stop words.
 *
 * @since 0.1.0
 */

/**
 * Words that say nothing about a peer.
 *
 * @since 0.1.0
 */
export const stopWords: ReadonlySet<string> = new Set(
  (
    "the and for are but not you all any can had her was one our out has have him his how its may new now " +
    "old see two way who did get got let say she too use that with this from they will would there their " +
    "what about which when make like time just know take into year your some could them than then look " +
    "only come over think also back after work first well even want because these give most very been " +
    "were said each where does doing done being much many such more other should here than those while"
  ).split(" ")
)

const word = /[\p{L}\p{N}]+/gu

/**
 * The terms of one text, with repetitions.
 *
 * @since 0.1.0
 */
export const extract = (text: string): ReadonlyArray<string> =>
  (text.toLowerCase().match(word) ?? []).filter((term) => term.length >= 3 && !stopWords.has(term))

/**
 * Term counts over many texts.
 *
 * @since 0.1.0
 */
export const count = (texts: Iterable<string>): Map<string, number> => {
  const counts = new Map<string, number>()
  for (const text of texts) {
    for (const term of extract(text)) counts.set(term, (counts.get(term) ?? 0) + 1)
  }
  return counts
}

/**
 * The `n` most frequent terms, ties broken alphabetically.
 *
 * @since 0.1.0
 */
export const top = (
  counts: ReadonlyMap<string, number>,
  n: number
): ReadonlyArray<{ readonly term: string; readonly count: number }> =>
  [...counts].map(([term, count]) => ({ term, count }))
    .sort((a, b) => b.count - a.count || (a.term < b.term ? -1 : a.term > b.term ? 1 : 0))
    .slice(0, n)
