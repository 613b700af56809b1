/**
 * Every export of a publishable package says since when it exists and what kind of thing it is, as every export
 * of Effect's own modules does: `@since` (checked against versions by `Since`) and `@category` (how generated API
 * docs group it: models, constructors, decisions, effects, layers, errors, …).
 *
 * @since 0.3.0
 */

/**
 * What a declaration's JSDoc must carry.
 *
 * @since 0.3.0
 * @category models
 */
export type Tag = "@since" | "@category"

/**
 * The exported declarations of a source text whose JSDoc lacks `@since` or `@category` (re-exports, `export *`
 * and `export { … }`, are the index's and carry their module's tags), with the line each starts on (1-based).
 *
 * @since 0.3.0
 * @category decisions
 */
export const missing = (
  source: string
): ReadonlyArray<{ readonly line: number; readonly name: string; readonly missing: ReadonlyArray<Tag> }> => {
  const lines = source.split("\n")
  return lines.flatMap((text, index) => {
    const declaration = /^export (?:declare )?(?:abstract )?(?:const|function|class|interface|type|enum|let) ([\w$]+)/
      .exec(text)
    if (declaration === null) return []
    const end = index - 1
    let start = end
    if (lines[end]?.trim() === "*/") {
      while (start >= 0 && !lines[start]!.trimStart().startsWith("/**")) start--
    }
    const doc = start >= 0 && lines[end]?.trim().endsWith("*/") ? lines.slice(start, end + 1).join("\n") : ""
    const absent = (["@since", "@category"] as const).filter((tag) => !new RegExp(`${tag}\\s+\\S`).test(doc))
    return absent.length === 0 ? [] : [{ line: index + 1, name: declaration[1]!, missing: absent }]
  })
}
