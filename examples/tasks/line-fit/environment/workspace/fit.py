"""Print the least-squares `slope intercept` of the x,y points read from stdin."""
import sys


def main():
    points = [tuple(float(v) for v in line.split(",")) for line in sys.stdin if line.strip()]
    # TODO: fit the line
    print(0, 0)


if __name__ == "__main__":
    main()
