/** The two largest logits of a row: the argmax, the runner-up and the gap between them (how
 * close a greedy choice is to a tie). Ties go to the lower index. */
export interface Top2 {
  best: number;
  second: number;
  gap: number;
}

export function top2(row: Float32Array): Top2 {
  let a = 0;
  let b = -1;
  for (let i = 1; i < row.length; i++) {
    if (row[i]! > row[a]!) (b = a), (a = i);
    else if (b < 0 || row[i]! > row[b]!) b = i;
  }
  return { best: a, second: b, gap: row[a]! - row[b]! };
}
