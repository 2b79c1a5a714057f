function area(w: number, h: number): number { return w * h; }
const a: string = area(2, 3);
console.log(a);
