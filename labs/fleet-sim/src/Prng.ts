/**
 * A small, fast, seeded pseudo-random generator (sfc32) for the simulator's hot loop: the same seed gives the
 * same sequence of uniform draws on every machine, so a run is reproducible to the event.
 *
 * @since 0.1.0
 */

/**
 * A uniform draw in [0, 1).
 *
 * @since 0.1.0
 */
export type Uniform = () => number

/**
 * Mixes a seed (any integer or string) into four 32-bit words with splitmix32.
 */
const seedWords = (seed: number | string): [number, number, number, number] => {
  let h = 0x9e3779b9
  const text = String(seed)
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x85ebca6b) >>> 0
  const next = () => {
    h = (h + 0x9e3779b9) >>> 0
    let z = h
    z = Math.imul(z ^ (z >>> 16), 0x21f0aaad)
    z = Math.imul(z ^ (z >>> 15), 0x735a2d97)
    return (z ^ (z >>> 15)) >>> 0
  }
  return [next(), next(), next(), next()]
}

/**
 * A seeded uniform generator (Chris Doty-Humphrey's sfc32): a period of at least 2^32, well past what one
 * simulation draws per deriver, and a few nanoseconds per draw.
 *
 * @since 0.1.0
 */
export const make = (seed: number | string): Uniform => {
  let [a, b, c, d] = seedWords(seed)
  const draw = (): number => {
    const t = (((a + b) >>> 0) + d) >>> 0
    d = (d + 1) >>> 0
    a = b ^ (b >>> 9)
    b = (c + (c << 3)) >>> 0
    c = (c << 21) | (c >>> 11)
    c = (c + t) >>> 0
    return t / 4294967296
  }
  // Discard the first draws: sfc32's state needs a few rounds to mix.
  for (let i = 0; i < 12; i++) draw()
  return draw
}
