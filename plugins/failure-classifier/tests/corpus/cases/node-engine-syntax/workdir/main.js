const total = (xs) => xs.reduce((a, b) => a + b, 0;
console.log(total([1]));
