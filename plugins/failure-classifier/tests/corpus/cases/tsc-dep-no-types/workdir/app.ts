import color from 'tinycolor-corpus';
console.log(color('red'));
