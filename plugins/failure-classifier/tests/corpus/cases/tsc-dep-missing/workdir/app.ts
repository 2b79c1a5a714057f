import _ from 'lodash';
console.log(_.chunk([1, 2], 1));
