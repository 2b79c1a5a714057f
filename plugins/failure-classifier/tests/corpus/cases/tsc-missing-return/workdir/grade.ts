export function grade(n: number): string {
  if (n > 50) { return 'pass'; }
}
