import { readFileSync } from 'fs';
console.log(readFileSync('x', 'utf8'));
