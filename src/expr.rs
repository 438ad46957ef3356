//! Boolean expressions over condition types: `!Migrating`,
//! `FinishedMigrating && ReadyToGo`, `BadConnectivity || UnhealthyDatabase`.
//!
//! The grammar of OLM's Probe design, parsed once at start:
//!
//! ```text
//! or      = and { "||" and }
//! and     = unary { "&&" unary }
//! unary   = "!" unary | primary
//! primary = NAME | "(" or ")"
//! ```
//!
//! `NAME` is a condition type (`Ready`, `example.com/Synced`). `!` binds
//! tighter than `&&`, which binds tighter than `||`. An `Important`
//! expression may use only `||` (and parentheses): [`Grammar::OrOnly`].
//! Errors carry the 1-based column they point at.
//!
//! Evaluation is three-valued (Kleene): a condition that is missing or
//! `Unknown` is unknown, `!unknown` is unknown, `false && unknown` is false,
//! `true || unknown` is true. Callers treat unknown as "cannot say", which
//! never blocks. [`Expr::evaluate`] also returns the terms that decided the
//! result, so a message can say *why* (`Migrating`, `ReadyToGo=False`).

use std::fmt;

/// A parsed expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expr {
    Condition(String),
    Not(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
}

/// Which operators an expression may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grammar {
    /// `!`, `&&`, `||`, parentheses (`Upgradeable`).
    Full,
    /// `||` and parentheses only (`Important`).
    OrOnly,
}

/// A three-valued truth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Truth {
    True,
    False,
    Unknown,
}

/// A syntax error: what is wrong and the 1-based column (in characters).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub column: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "column {}: {}", self.column, self.message)
    }
}

/// The longest expression accepted; also bounds the parser's recursion.
pub(crate) const MAX_LEN: usize = 1024;

/// The deepest nesting of `!` and parentheses accepted.
const MAX_DEPTH: usize = 64;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Name(String),
    Not,
    And,
    Or,
    Open,
    Close,
    End,
}

impl Token {
    fn describe(&self) -> String {
        match self {
            Token::Name(n) => format!("{n:?}"),
            Token::Not => "'!'".into(),
            Token::And => "'&&'".into(),
            Token::Or => "'||'".into(),
            Token::Open => "'('".into(),
            Token::Close => "')'".into(),
            Token::End => "the end".into(),
        }
    }
}

/// Tokens with their 1-based columns.
fn tokenize(input: &str) -> Result<Vec<(Token, usize)>, ParseError> {
    let chars: Vec<char> = input.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let column = i + 1;
        let c = chars[i];
        let two = chars.get(i + 1).copied();
        let token = match c {
            _ if c.is_whitespace() => {
                i += 1;
                continue;
            }
            '!' => Token::Not,
            '(' => Token::Open,
            ')' => Token::Close,
            '&' if two == Some('&') => Token::And,
            '|' if two == Some('|') => Token::Or,
            '&' | '|' => {
                return Err(ParseError { column, message: format!("'{c}' must be doubled ('{c}{c}')") });
            }
            _ if c.is_ascii_alphanumeric() => {
                let start = i;
                // metav1's `type` pattern allows a DNS-subdomain prefix with
                // `/`, then letters, digits, `-`, `_`, `.`.
                i += chars[i..]
                    .iter()
                    .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
                    .count();
                let name: String = chars[start..i].iter().collect();
                if !chars[i - 1].is_ascii_alphanumeric() {
                    return Err(ParseError {
                        column: i,
                        message: format!("condition name {name:?} must end with a letter or digit"),
                    });
                }
                tokens.push((Token::Name(name), column));
                continue;
            }
            _ => return Err(ParseError { column, message: format!("unexpected character {c:?}") }),
        };
        i += if matches!(token, Token::And | Token::Or) { 2 } else { 1 };
        tokens.push((token, column));
    }
    tokens.push((Token::End, chars.len() + 1));
    Ok(tokens)
}

struct Parser {
    tokens: Vec<(Token, usize)>,
    at: usize,
    grammar: Grammar,
    depth: usize,
}

impl Parser {
    fn peek(&self) -> &(Token, usize) {
        &self.tokens[self.at]
    }

    fn advance(&mut self) -> (Token, usize) {
        let t = self.tokens[self.at].clone();
        if t.0 != Token::End {
            self.at += 1;
        }
        t
    }

    fn error<T>(&self, column: usize, message: String) -> Result<T, ParseError> {
        Err(ParseError { column, message })
    }

    fn deeper(&mut self, column: usize) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.error(column, format!("nested more than {MAX_DEPTH} levels deep"));
        }
        Ok(())
    }

    fn or(&mut self) -> Result<Expr, ParseError> {
        let mut left = self.and()?;
        while self.peek().0 == Token::Or {
            self.advance();
            left = Expr::Or(Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Expr, ParseError> {
        let mut left = self.unary()?;
        while self.peek().0 == Token::And {
            let (_, column) = self.advance();
            if self.grammar == Grammar::OrOnly {
                return self.error(column, "only '||' is allowed in an Important expression".into());
            }
            left = Expr::And(Box::new(left), Box::new(self.unary()?));
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, ParseError> {
        let (token, column) = self.advance();
        match token {
            Token::Not => {
                if self.grammar == Grammar::OrOnly {
                    return self.error(column, "only '||' is allowed in an Important expression".into());
                }
                self.deeper(column)?;
                let inner = self.unary()?;
                self.depth -= 1;
                Ok(Expr::Not(Box::new(inner)))
            }
            Token::Name(name) => Ok(Expr::Condition(name)),
            Token::Open => {
                self.deeper(column)?;
                let inner = self.or()?;
                self.depth -= 1;
                match self.advance() {
                    (Token::Close, _) => Ok(inner),
                    (other, at) => self.error(
                        at,
                        format!("expected ')' to close the '(' at column {column}, found {}", other.describe()),
                    ),
                }
            }
            other => self.error(column, format!("expected a condition name, '!' or '(', found {}", other.describe())),
        }
    }
}

impl Expr {
    /// Parses `input` under `grammar`.
    pub fn parse(input: &str, grammar: Grammar) -> Result<Expr, ParseError> {
        if input.chars().count() > MAX_LEN {
            return Err(ParseError { column: MAX_LEN + 1, message: format!("longer than {MAX_LEN} characters") });
        }
        let tokens = tokenize(input)?;
        let mut parser = Parser { tokens, at: 0, grammar, depth: 0 };
        let expr = parser.or()?;
        match parser.advance() {
            (Token::End, _) => Ok(expr),
            (other, column) => Err(ParseError {
                column,
                message: format!("expected '&&', '||' or the end, found {}", other.describe()),
            }),
        }
    }

    /// Evaluates against `lookup` (a condition type's truth; missing
    /// conditions are [`Truth::Unknown`]). Returns the result and the terms
    /// that decided it, in order: a condition that is true by its name, a
    /// false one as `Name=False`, an unknown one as `Name=Unknown`.
    pub fn evaluate(&self, lookup: &dyn Fn(&str) -> Truth) -> (Truth, Vec<String>) {
        match self {
            Expr::Condition(name) => {
                let truth = lookup(name);
                let term = match truth {
                    Truth::True => name.clone(),
                    Truth::False => format!("{name}=False"),
                    Truth::Unknown => format!("{name}=Unknown"),
                };
                (truth, vec![term])
            }
            Expr::Not(inner) => {
                let (truth, terms) = inner.evaluate(lookup);
                let flipped = match truth {
                    Truth::True => Truth::False,
                    Truth::False => Truth::True,
                    Truth::Unknown => Truth::Unknown,
                };
                (flipped, terms)
            }
            Expr::And(a, b) => combine(a.evaluate(lookup), b.evaluate(lookup), Truth::False),
            Expr::Or(a, b) => combine(a.evaluate(lookup), b.evaluate(lookup), Truth::True),
        }
    }

    /// The condition types the expression mentions.
    pub fn conditions(&self) -> Vec<&str> {
        match self {
            Expr::Condition(name) => vec![name],
            Expr::Not(inner) => inner.conditions(),
            Expr::And(a, b) | Expr::Or(a, b) => [a.conditions(), b.conditions()].concat(),
        }
    }
}

/// `&&` (dominant = False) or `||` (dominant = True) in Kleene logic: the
/// dominant value wins and is explained by the operands that have it;
/// otherwise unknown beats the other value; otherwise both operands explain.
fn combine(a: (Truth, Vec<String>), b: (Truth, Vec<String>), dominant: Truth) -> (Truth, Vec<String>) {
    let result = match (a.0, b.0) {
        (x, y) if x == dominant || y == dominant => dominant,
        (Truth::Unknown, _) | (_, Truth::Unknown) => Truth::Unknown,
        // Both the other value.
        (x, _) => x,
    };
    let terms = [a, b].into_iter().filter(|(truth, _)| *truth == result).flat_map(|(_, terms)| terms).collect();
    (result, terms)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Expr {
        Expr::parse(s, Grammar::Full).unwrap_or_else(|e| panic!("{s:?}: {e}"))
    }

    fn error(s: &str, grammar: Grammar) -> String {
        Expr::parse(s, grammar).unwrap_err().to_string()
    }

    /// Evaluates with conditions given as `Name=True,Other=False`.
    fn eval(expr: &str, conditions: &str) -> (Truth, Vec<String>) {
        let known: Vec<(&str, &str)> = conditions.split(',').filter_map(|kv| kv.split_once('=')).collect();
        let lookup = move |name: &str| match known.iter().find(|(k, _)| *k == name).map(|(_, v)| *v) {
            Some("True") => Truth::True,
            Some("False") => Truth::False,
            _ => Truth::Unknown,
        };
        parse(expr).evaluate(&lookup)
    }

    #[test]
    fn precedence_not_then_and_then_or() {
        let or = |a, b| Expr::Or(Box::new(a), Box::new(b));
        let and = |a, b| Expr::And(Box::new(a), Box::new(b));
        let not = |a| Expr::Not(Box::new(a));
        let c = |n: &str| Expr::Condition(n.into());
        assert_eq!(parse("A || B && !C"), or(c("A"), and(c("B"), not(c("C")))));
        assert_eq!(parse("!A && B || C && D"), or(and(not(c("A")), c("B")), and(c("C"), c("D"))));
        assert_eq!(parse("A && B && C"), and(and(c("A"), c("B")), c("C")));
        assert_eq!(parse("(A || B) && C"), and(or(c("A"), c("B")), c("C")));
        assert_eq!(parse("!!A"), not(not(c("A"))));
        assert_eq!(parse("!(A||B)"), not(or(c("A"), c("B"))));
        assert_eq!(parse("  example.com/Synced-2  "), c("example.com/Synced-2"));
    }

    #[test]
    fn syntax_errors_point_at_the_column() {
        let cases = [
            ("", "column 1: expected a condition name, '!' or '(', found the end"),
            ("A &&", "column 5: expected a condition name, '!' or '(', found the end"),
            ("A & B", "column 3: '&' must be doubled ('&&')"),
            ("A | B", "column 3: '|' must be doubled ('||')"),
            ("(A || B", "column 8: expected ')' to close the '(' at column 1, found the end"),
            ("A B", "column 3: expected '&&', '||' or the end, found \"B\""),
            ("A)", "column 2: expected '&&', '||' or the end, found ')'"),
            ("!", "column 2: expected a condition name, '!' or '(', found the end"),
            ("A && $B", "column 6: unexpected character '$'"),
            ("Migrating-", "column 10: condition name \"Migrating-\" must end with a letter or digit"),
            ("|| A", "column 1: expected a condition name, '!' or '(', found '||'"),
            ("é", "column 1: unexpected character 'é'"),
        ];
        for (input, want) in cases {
            assert_eq!(error(input, Grammar::Full), want, "{input:?}");
        }
    }

    #[test]
    fn important_allows_only_or() {
        let c = |n: &str| Box::new(Expr::Condition(n.into()));
        assert_eq!(
            Expr::parse("BadConnectivity || (UnhealthyDatabase)", Grammar::OrOnly).unwrap(),
            Expr::Or(c("BadConnectivity"), c("UnhealthyDatabase"))
        );
        assert_eq!(error("A && B", Grammar::OrOnly), "column 3: only '||' is allowed in an Important expression");
        assert_eq!(error("A || !B", Grammar::OrOnly), "column 6: only '||' is allowed in an Important expression");
    }

    #[test]
    fn nesting_and_length_are_bounded() {
        let deep = format!("{}A{}", "(".repeat(65), ")".repeat(65));
        assert_eq!(error(&deep, Grammar::Full), "column 65: nested more than 64 levels deep");
        assert_eq!(error(&"!".repeat(100), Grammar::Full), "column 65: nested more than 64 levels deep");
        let ok = format!("{}A{}", "(".repeat(64), ")".repeat(64));
        assert!(Expr::parse(&ok, Grammar::Full).is_ok());
        assert_eq!(error(&"A".repeat(MAX_LEN + 1), Grammar::Full), "column 1025: longer than 1024 characters");
    }

    #[test]
    fn three_valued_evaluation() {
        use Truth::*;
        let table = [
            ("!Migrating", "Migrating=True", False),
            ("!Migrating", "Migrating=False", True),
            ("!Migrating", "", Unknown),
            ("A && B", "A=True,B=True", True),
            ("A && B", "A=False", False),
            ("A && B", "A=True", Unknown),
            ("A || B", "B=True", True),
            ("A || B", "A=False", Unknown),
            ("A || B", "A=False,B=False", False),
            ("!(A && B)", "A=False", True),
            ("A || B && C", "A=False,B=True,C=False", False),
        ];
        for (expr, conditions, want) in table {
            assert_eq!(eval(expr, conditions).0, want, "{expr} with {conditions}");
        }
    }

    #[test]
    fn the_deciding_terms_explain_the_result() {
        assert_eq!(eval("!Migrating", "Migrating=True"), (Truth::False, vec!["Migrating".into()]));
        assert_eq!(
            eval("FinishedMigrating && ReadyToGo", "FinishedMigrating=True,ReadyToGo=False"),
            (Truth::False, vec!["ReadyToGo=False".into()])
        );
        assert_eq!(
            eval("BadConnectivity || UnhealthyDatabase", "BadConnectivity=True,UnhealthyDatabase=True"),
            (Truth::True, vec!["BadConnectivity".into(), "UnhealthyDatabase".into()])
        );
        assert_eq!(eval("A && B", "A=True"), (Truth::Unknown, vec!["B=Unknown".into()]));
        assert_eq!(eval("A && B", "A=True,B=True"), (Truth::True, vec!["A".into(), "B".into()]));
    }

    #[test]
    fn lists_its_conditions() {
        assert_eq!(parse("!(A || B) && example.com/C").conditions(), ["A", "B", "example.com/C"]);
    }
}
