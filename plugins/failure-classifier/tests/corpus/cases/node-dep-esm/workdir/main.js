import chalk from 'chalk';
console.log(chalk.red('x'));
