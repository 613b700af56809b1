/**
 * One failure table (issue #34): what a SQLSTATE means is written once, in `@resilience/db-session`'s `Classify`.
 * A SQLSTATE literal anywhere else in the source is a second reading of a database failure, the drift the table
 * exists to prevent (the deriver's own `cancelledCodes` lacked 25P04 while the table had it). This finds them.
 *
 * @since 0.3.0
 */
import { withoutComments } from "./Source.ts"

/**
 * PostgreSQL's SQLSTATE classes (Appendix A, "PostgreSQL Error Codes"): the first two characters of every code
 * the server sends. A five-character literal in one of these classes is read as a SQLSTATE; other five-digit
 * strings (a port, `"65535"`) are not.
 *
 * @since 0.3.0
 * @category reading
 */
export const classes: ReadonlyArray<string> = [
  "00",
  "01",
  "02",
  "03",
  "08",
  "09",
  "0A",
  "0B",
  "0F",
  "0L",
  "0P",
  "0Z",
  "20",
  "21",
  "22",
  "23",
  "24",
  "25",
  "26",
  "27",
  "28",
  "2B",
  "2D",
  "2F",
  "34",
  "38",
  "39",
  "3B",
  "3D",
  "3F",
  "40",
  "42",
  "44",
  "53",
  "54",
  "55",
  "57",
  "58",
  "72",
  "F0",
  "HV",
  "P0",
  "XX"
]

/**
 * The files allowed to spell a SQLSTATE: the table itself, and the Supavisor stand-in, which reproduces the
 * bytes Supavisor sends (its SQLSTATE is part of the wire behaviour it stands in for, not a reading of it).
 *
 * @since 0.3.0
 * @category reading
 */
export const owners: ReadonlyArray<string> = [
  "packages/db-session/src/Classify.ts",
  "packages/test-db/src/SupavisorStandIn.ts"
]

const literal = /(["'`])([0-9A-Z]{5})\1/g

/**
 * The SQLSTATE literals in one source file's code (comments removed), with the line each is on (1-based).
 *
 * @since 0.3.0
 * @category reading
 */
export const findings = (source: string): ReadonlyArray<{ readonly line: number; readonly code: string }> =>
  withoutComments(source).split("\n").flatMap((text, index) =>
    [...text.matchAll(literal)]
      .map((match) => match[2]!)
      .filter((code) => classes.includes(code.slice(0, 2)) && /[0-9]/.test(code))
      .map((code) => ({ line: index + 1, code }))
  )
