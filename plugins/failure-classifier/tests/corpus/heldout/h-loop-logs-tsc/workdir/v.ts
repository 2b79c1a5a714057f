const n: number = 'seven';
console.log(n);
