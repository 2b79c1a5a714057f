import { parse } from './parser.js';
console.log(parse('x'));
