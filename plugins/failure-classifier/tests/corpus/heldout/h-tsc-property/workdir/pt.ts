interface P { x: number }
const p: P = { x: 1 };
console.log(p.y);
